"""The Kueue model's passes told the short way when every job they would look at could only
be set aside (no Django).

A requeue (``kueue_model``) puts every head set aside back into its queue, and the pass then
takes the cohort's heads cycle by cycle, one per ClusterQueue per cycle, until each queue is
empty or held by its caps: most heads do not fit and are set aside again. ``_live`` tells,
from the flavor's state, which of the jobs the pass would look at could do anything else:
start, preempt, reclaim (or start its reclaim grace), or say a new reason (a cap's included).
When none could, nothing that decides those changes before the pass ends (a head set aside
changes no GPU, no cap, no lending), and the end of the pass is known without running its
cycles (``_settle``): every job no cap holds set aside, each queue looked at left with the jobs
its caps hold and stamped as its last look stamps it. Their order within and across cycles
decides nothing then (the model pushes no wakes: ``KueueReplay._wake``). So:

- a requeue whose heads set aside, and the queues the pass would look at, hold no live job is
  settled without putting the heads back (``KueueReplay._due``);
- in a pass with live jobs, a cycle whose heads are all dead is set aside at once, and once
  the live jobs were tried (and after each start, the state having changed) the rest of the
  pass is settled when none is left.

The result is the same, job for job (``tests/queues/test_replay_kueue_model.py`` pins it).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Collection, Sequence
from itertools import chain

from .engine import EPS, LENDING, QUEUE_DEPTH, RESOURCES, TIER_CAP
from .engine.vocabulary import PROJECT_MAX, USER_CAP, _Flavor
from .kueue_fair import _FairSharing
from .rules import FORBIDDEN

_Entry = tuple[int, int, float, float, int]  # borrowing, share, -priority, arrival, job


class _Settle(_FairSharing):
    """``KueueReplay``'s heads set aside, and the rest of a pass that only sets them aside."""

    aside: dict[str, set[int]]

    def _set_aside(self, j: int, flavor: _Flavor, name: str, key: tuple[str, str]) -> None:
        group = flavor.groups[key]
        group.remove(j)
        if not group:
            del flavor.groups[key]
        flavor.stale.add(key)
        self.aside.setdefault(name, set()).add(j)

    def _stamped(self, key: tuple[str, str], flavor: _Flavor) -> bool:
        """A capped queue whose candidate would return at once (``_candidate``'s stamp)."""
        group, stamp = flavor.groups[key], flavor.stamps.get(key)
        if stamp is None:
            return False
        tier = self.tier[group[0]]
        _tier_left, left = self._left(flavor, key[1], tier)
        version = self.user_version.get(tier.slug, 0)
        return stamp[0] >= left - EPS and stamp[1:] == (len(group), version)

    def _dead(
        self, j: int, flavor: _Flavor, t: float, lent: dict[tuple[str, float], str | None]
    ) -> bool:
        """Whether trying ``j`` as a head now would only set it aside: the lending limits hold
        it as they did, or it neither fits, nor may preempt (or its victims are protected, as
        ``_try_preempt`` remembers), nor may reclaim, and it already waits for resources.
        ``lent``: ``_lending`` per project and GPUs asked, of work that may borrow."""
        job = self.jobs[j]
        gpus, said, free, project = job.gpus, self.reason[j], flavor.free, job.project
        quota = flavor.quotas.get(project)  # none: guaranteed nothing (``_quota``)
        after = flavor.usage.get(project, 0.0) + gpus
        over = after > (quota.guarantee if quota is not None else 0.0) + EPS
        if over and self.cls[j].kind == FORBIDDEN:
            lending: str | None = LENDING  # ``_lending``: never-preempt work never borrows
        elif not over:
            lending = None
        else:
            memo = (project, gpus)
            if memo not in lent:
                lent[memo] = self._lending(j, flavor)
            lending = lent[memo]
        if self.fair:  # Kueue's fair sharing: its own look for targets (``kueue_fair``)
            return self._fair_dead(j, flavor, t, lending)
        if lending == LENDING:
            return said == LENDING
        if said != RESOURCES:
            return False
        if lending is None:
            if free + EPS >= gpus:
                return False
            tier = self.tier[j]
            if tier.may_preempt and tier.preemptible:
                lower = sum(flavor.tier_running.get(slug, 0.0) for slug in tier.preemptible)
                if lower + free + EPS >= gpus:
                    held = self.no_victims.get((j, "tier"))
                    if held is None or not (t < held[0] and free <= held[1] + EPS):
                        return False
        return over or project not in flavor.quotas or flavor.borrowed <= EPS

    def _live(
        self, flavor: _Flavor, t: float, aside: Collection[int] = ()
    ) -> tuple[set[int], set[tuple[str, str]], dict[tuple[str, str], list[int]]] | None:
        """What the rest of the pass would look at, with ``aside`` put back in their queues:
        the jobs that could do more than be set aside (or stay held by a cap with the reason
        they have), the queues it would look at, and of those it would scan (not return at
        once by their stamp) the jobs a cap would hold; None when a queue is longer than the
        queue depth (not told here)."""
        groups, entries, jobs, reason = flavor.groups, flavor.entries, self.jobs, self.reason
        coming: dict[tuple[str, str], list[int]] = {}
        for j in aside:
            coming.setdefault((self.tier[j].slug, jobs[j].project), []).append(j)
        keys = flavor.stale.union(entries, coming)
        for key in coming:
            if key not in groups:  # a queue made again: its project's others are looked at
                keys.update(flavor.by_project.get(key[1], ()))
        live: set[int] = set()
        lent: dict[tuple[str, float], str | None] = {}
        scan: dict[tuple[str, str], list[int]] = {}
        for key in keys:
            group: Sequence[int] = groups.get(key) or ()
            came: Sequence[int] = coming.get(key, ())
            if not came and (not group or (key not in entries and self._stamped(key, flavor))):
                continue  # looked at, it would return at once
            if len(group) + len(came) > QUEUE_DEPTH:
                return None
            tier = self.tier[group[0] if group else came[0]]
            slug = tier.slug
            tier_left, left = self._left(flavor, key[1], tier)
            user_cap = tier.max_gpus_per_user
            held = scan[key] = []
            # A job's fate here is its GPUs', its reason's and its class's (and, of a tier
            # that may preempt, its protected victims' look: ``_dead``; when fair sharing's
            # look for targets depends on the job's own priority, that priority's): told once
            # per queue.
            told: dict[
                tuple[float, str | None, str, tuple[float, float] | None, float | None], bool
            ] = {}
            by_priority = self._fair_by_priority(key[1], flavor)
            victims = self.no_victims if tier.may_preempt else None
            cls, user_use, waits = self.cls, self.user_use, (RESOURCES, LENDING)
            over_left, over_tier = left + EPS, tier_left + EPS
            over_user = math.inf if user_cap is None else user_cap + EPS
            for j in chain(group, came):
                job = jobs[j]
                gpus = job.gpus
                if gpus > over_left:
                    token = TIER_CAP if gpus > over_tier else PROJECT_MAX
                elif (
                    user_cap is not None and user_use.get((job.user, slug), 0.0) + gpus > over_user
                ):
                    token = USER_CAP
                elif reason[j] not in waits:
                    live.add(j)  # ``_dead``: only a job already waiting for GPUs may be
                    continue
                else:
                    fate = (
                        gpus,
                        reason[j],
                        cls[j].kind,
                        None if victims is None else victims.get((j, "tier")),
                        self._priority(j, t) if by_priority else None,
                    )
                    dead = told.get(fate)
                    if dead is None:
                        dead = told[fate] = self._dead(j, flavor, t, lent)
                    if not dead:
                        live.add(j)
                    continue
                held.append(j)
                if reason[j] != token:
                    live.add(j)
        return live, keys, scan

    def _settle(
        self,
        name: str,
        flavor: _Flavor,
        keys: set[tuple[str, str]],
        scan: dict[tuple[str, str], list[int]],
    ) -> None:
        """The end of a pass in which no job is live (``_live``): what the cycles would leave.
        Each job no cap holds is set aside; each queue looked at is left with the jobs the
        caps hold, stamped as its last look stamps it (or gone, its stamp with it)."""
        groups, stamps = flavor.groups, flavor.stamps
        aside = self.aside.setdefault(name, set())
        for key in keys:
            flavor.expiry.pop(key, None)
            if key not in scan and not groups.get(key):
                stamps.pop(key, None)
        for key, held in scan.items():
            group = groups.get(key)
            if group:
                kept = set(held)
                aside.update(j for j in group if j not in kept)
            if not held:
                groups.pop(key, None)
                stamps.pop(key, None)
                continue
            if group is None or len(group) != len(held):
                groups[key] = deque(held)
            tier = self.tier[held[0]]
            _tier_left, left = self._left(flavor, key[1], tier)
            stamps[key] = (left, len(held), self.user_version.get(tier.slug, 0))
        if not aside:
            del self.aside[name]
        flavor.entries.clear()
        flavor.stale = set()
