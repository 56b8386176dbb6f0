"""Admission: a rule switch applied, the next candidate of a flavor, a job started and stopped."""

from __future__ import annotations

import math
from collections import deque

from ..rules import ClassRule, Rules
from .state import _State
from .vocabulary import (
    _END,
    EPS,
    PROJECT_MAX,
    QUEUE_DEPTH,
    TIER_CAP,
    USER_CAP,
    _Flavor,
    _lend,
)


class _Admission(_State):
    """``Replay``'s admission: a rule switch applied, the next candidate of a flavor, a job
    started and stopped."""

    def _apply(self, rules: Rules, t: float) -> None:
        self.rules = rules
        self.tiers = {tier.slug: tier for tier in rules.tiers}
        self.classes = {cls.slug: cls for cls in rules.classes}
        default_class = (
            self.classes[rules.default_class]
            if rules.default_class
            else ClassRule(slug="", kind="allowed")
        )
        self.default_class = default_class
        default_tier = rules.default_tier or min(rules.tiers, key=lambda tier: tier.score).slug
        self.default_tier = self.tiers[default_tier]
        for name, capacity in rules.capacity.items():
            flavor = self.flavors.get(name)
            if flavor is None:
                flavor = self.flavors[name] = _Flavor(capacity)
                flavor.last = t
            else:
                self._tick_flavor(flavor, t)
                flavor.free += capacity - flavor.capacity
                flavor.capacity = capacity
            flavor.quotas = {}
        for quota in rules.quotas:
            self.flavors[quota.flavor].quotas[quota.project] = quota
        for name, flavor in self.flavors.items():
            for project in list(flavor.usage):
                self._tick_project(project, name, flavor, t)
            guaranteed = sum(quota.guarantee for quota in flavor.quotas.values())
            flavor.unguaranteed = max(0.0, flavor.capacity - guaranteed)
            flavor.borrowed = 0.0
            flavor.lendable = 0.0
            for project, quota in flavor.quotas.items():
                flavor.lendable += _lend(quota, flavor.usage.get(project, 0.0))
            for project, used in flavor.usage.items():
                flavor.borrowed += max(0.0, used - self._quota(flavor, project).guarantee)
        # Waiting jobs are re-evaluated under the new rules.
        waiting = [j for flavor in self.flavors.values() for g in flavor.groups.values() for j in g]
        waiting += list(self.capped)
        self.capped = set()
        self.by_tier = {}
        self.user_version = {}
        self.no_victims = {}
        for flavor in self.flavors.values():
            flavor.groups = {}
            flavor.entries = {}
            flavor.stale = set()
            flavor.unswept = set()
            flavor.within = set()
            flavor.held = set()
            flavor.stamps = {}
            flavor.expiry = {}
            flavor.next_expiry = math.inf
            flavor.by_project = {}
            flavor.blocker = None
        for j in sorted(waiting, key=lambda j: (self.jobs[j].arrival, j)):
            self._enqueue(j, t, fresh=False)
        self.dirty.update(self.flavors)

    def _candidate(self, name: str, flavor: _Flavor, key: tuple[str, str], t: float) -> None:
        """Find the first job of queue ``key`` that no cap holds back (Slurm skips held jobs)."""
        flavor.entries.pop(key, None)
        flavor.unswept.discard(key)
        flavor.within.discard(key)
        flavor.expiry.pop(key, None)
        group = flavor.groups.get(key)
        if not group:
            flavor.stamps.pop(key, None)
            return
        pos = self._first_uncapped(flavor, key, group, t)
        if pos < 0:
            return
        j, tier = group[pos], self.tier[group[0]]
        entry = self._key(j, flavor, t)
        flavor.entries[key] = (entry, key, pos)
        flavor.unswept.add(key)
        if entry[0] == 0:
            flavor.within.add(key)
        if (
            tier.aging_after
            and tier.aging_step
            and (tier.aging_cap is None or -entry[1] < tier.aging_cap)
        ):
            arrival = self.jobs[j].arrival
            steps = int((t - arrival) / tier.aging_after) + 1
            until = arrival + steps * tier.aging_after
            if until <= t:  # rounded onto ``t``: a wake now would find the same step again
                until = _first_step_after(t, arrival, tier.aging_after, steps)
            flavor.expiry[key] = until
            if until < flavor.next_expiry:
                flavor.next_expiry = until
            self._wake(name, until)

    def _first_uncapped(
        self, flavor: _Flavor, key: tuple[str, str], group: deque[int], t: float
    ) -> int:
        """The position in queue ``key`` of its first job no cap holds back (Slurm skips held
        jobs; each held one before it says its cap), or -1: every job looked at is held, or
        nothing that held them back has eased since (the queue's stamp)."""
        jobs = self.jobs
        tier = self.tier[group[0]]
        slug = tier.slug
        tier_left, left = self._left(flavor, key[1], tier)
        version = self.user_version.get(slug, 0)
        stamp = flavor.stamps.get(key)
        if (
            stamp is not None
            and stamp[0] >= left - EPS
            and stamp[1] == len(group)
            and stamp[2] == version
        ):
            return -1  # nothing that held it back has eased
        user_cap = tier.max_gpus_per_user
        # ``_say`` inlined: a held queue is looked at again and again (the hot loop).
        reason, reasons = self.reason, self.reasons
        over_left, over_tier = left + EPS, tier_left + EPS
        for pos in range(min(len(group), QUEUE_DEPTH)):
            j = group[pos]
            gpus = jobs[j].gpus
            if gpus > over_left:
                token = TIER_CAP if gpus > over_tier else PROJECT_MAX
                if reason[j] != token:
                    reason[j] = token
                    reasons.append((j, t, token))
                continue
            if (
                user_cap is not None
                and self.user_use.get((jobs[j].user, slug), 0.0) + gpus > user_cap + EPS
            ):
                self._say(j, USER_CAP, t)
                continue
            flavor.stamps.pop(key, None)
            return pos
        flavor.stamps[key] = (left, len(group), version)
        return -1

    def _begin(self, j: int, flavor: _Flavor, name: str, t: float) -> None:
        job = self.jobs[j]
        group = flavor.groups[(self.tier[j].slug, job.project)]
        group.remove(j)
        if not group:
            del flavor.groups[(self.tier[j].slug, job.project)]
        flavor.stale.add((self.tier[j].slug, job.project))
        self._use(flavor, name, job.project, job.gpus, t)
        self._tier_use(j, job.gpus)
        flavor.running.add(j)
        if math.isnan(self.start[j]):
            self.start[j] = t
        self.run_start[j] = t
        self.token[j] += 1
        self.ask.pop(j, None)
        if self.reason[j] is not None:
            self._say(j, "", t)  # running: no reason
        self._push(t + self.remaining[j], _END, j, self.token[j])

    def _stop(self, j: int, t: float) -> None:
        job = self.jobs[j]
        flavor = self.flavors[job.flavor]
        flavor.running.discard(j)
        self._use(flavor, job.flavor, job.project, -job.gpus, t)
        self._tier_use(j, -job.gpus)
        self.runs.append((j, self.run_start[j], t))
        self.dirty.add(job.flavor)


def _first_step_after(t: float, arrival: float, after: float, steps: int) -> float:
    """The first moment after ``t`` at which the key counts ``steps`` aging steps (the key
    counts ``int((moment - arrival) / after)``): a step's boundary computed in floats may
    fall on ``t`` itself while the key at ``t`` still counts one step fewer, and a wake at
    ``t`` would then be asked for again and again in one instant. A few ulps later."""
    until = math.nextafter(t, math.inf)
    while int((until - arrival) / after) < steps:
        until = math.nextafter(until, math.inf)
    return until
