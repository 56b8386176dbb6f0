"""The replay as Kueue 0.17 admits: ``BestEffortFIFO`` queues and fair sharing (no Django).

The engine (``queues.replay.engine``) orders work by the tier's score and keeps that order
strictly: when the first job does not fit, no later borrowing job of its flavor starts.
``KueueReplay`` is the engine with what Kueue's scheduler does instead (its source:
``pkg/scheduler/scheduler.go``, ``fair_sharing_iterator.go``, ``pkg/cache/queue/
cluster_queue.go`` and ``inadmissible_workloads.go``), as measured on the lab's Kueue
(``bench/replay_fidelity.py --scheduler kueue``):

- **Priority is the WorkloadPriorityClass value**, the tier's scheduler value that Arbiter's
  sync writes (``priorities``; the tier's score when a tier has none), raised by aging as the
  sync raises it (``queues.services.kueue.enforce.aged``: steps of ``aging_step`` score
  points worth the value gap to the cap tier per point of score gap, never above the cap's
  value; no aging without a cap). Within a ClusterQueue: priority, then arrival.
- **Fair sharing orders the cohort's queues before priority**: of the heads of the cohort's
  ClusterQueues, first those not borrowing on their flavor, then the lowest dominant resource
  share with the head admitted (GPUs borrowed above the guarantees over all flavors, per GPU
  the cohort lends, per unit of fair-share weight; compared exactly, as Kueue's
  ``CompareDRS`` does), then the higher priority, then the earlier.
- **One head per ClusterQueue per cycle, over all its flavors**: a project's ClusterQueue
  holds all its tiers and covers every flavor of the pool (one heap), so its head is its
  first job by priority, then arrival, whatever its flavor. A pass runs over the pool (the
  cohort): each cycle takes every queue's head once, in the order above, and admits those
  that fit (or preempt, or reclaim); a queue offers its next job only at the next cycle, so
  an old head of a full flavor keeps its queue's other flavor out of that cycle. A head that
  fitted the cycle's snapshot but no longer does is skipped (Kueue requeues it at once) and
  is its queue's head again at the next cycle. Cycles take milliseconds: here they run in
  the same instant. A workload preempted at an instant preempts nothing at that instant (its
  eviction takes a second or more on Kueue).
- **Inadmissible heads wait for a requeue**: a head that neither fits nor preempts, for want
  of GPUs or because the lending limits leave it none to borrow (never-preempt work never
  borrows), is set aside (BestEffortFIFO: the next job of its queue becomes the head), and
  is looked at again only when Kueue requeues the cohort's inadmissible workloads:
  ``REQUEUE_BATCH`` (1 s, Kueue's ``requeueBatchPeriod``) after a workload of the cohort
  (here: of the pool, all its flavors) ended or was preempted, once per batch; an arrival
  does not requeue them. Meanwhile newly arrived work may take GPUs an end freed before the
  passed-over heads are tried again.

Sticky preempting heads (here a preemptor starts at once), Kueue's preemption within the
cluster queue and the scheduling-equivalence hashing (off by default in 0.17) are the
engine's or not modelled.

Every pass ends with each queue empty or held by its caps, so the engine's wakes (aging steps,
reclaim graces, protected victims) would bring passes that look at nothing: none is pushed.
A pass whose jobs could only be set aside again is told the short way (``kueue_settle``).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Literal

from .engine import EPS, LENDING, RESOURCES
from .engine.vocabulary import _WAKE, _Flavor
from .kueue_cohort import KueueSettings
from .kueue_settle import _Entry, _Settle
from .rules import Job, Rules, TierRule

REQUEUE_BATCH = 1.0  # seconds: Kueue's requeueBatchPeriod for inadmissible workloads
DRS_SCALE = 10**9  # the dominant resource share compared in billionths (Kueue: a float64)
# A cycle's head: its key, its flavor, its queue, its place in the queue.
_Head = tuple[_Entry, str, tuple[str, str], int]
# What ``_live`` tells of a flavor: the live jobs, the queues looked at, the jobs caps hold.
_Told = tuple[set[int], set[tuple[str, str]], dict[tuple[str, str], list[int]]]


class KueueReplay(_Settle):
    def __init__(
        self,
        jobs: Sequence[Job],
        timeline: Sequence[tuple[float, Rules]],
        priorities: Mapping[str, float] | None = None,
        settings: KueueSettings | None = None,
    ) -> None:
        super().__init__(jobs, timeline, settings)
        self.priorities = dict(priorities or {})
        # Per flavor the heads set aside (inadmissible) until the pool's next requeue.
        self.aside: dict[str, set[int]] = {}
        self.requeue_at: dict[str, float] = {}
        # Kept until the rules change (``_apply``): per tier the cap's value and the value
        # per point of score (``_aging``), and the GPUs of all flavors (the share's divisor).
        self.aging: dict[str, tuple[float, float]] = {}
        self.lendable: float | None = None
        self.pools: dict[str, list[str]] = {}  # per pool its flavors (``_pool``)
        self.evicted: dict[int, float] = {}  # per job preempted, when last

    def _value(self, tier: TierRule) -> float:
        return self.priorities.get(tier.slug, float(tier.score))

    def _priority(self, j: int, t: float) -> float:
        """The Workload's priority: its tier's value, raised by aging as the sync does."""
        tier = self.tier[j]
        base = self._value(tier)
        if not (tier.aging_after and tier.aging_step and tier.aging_cap is not None):
            return base
        steps = int((t - self.jobs[j].arrival) // tier.aging_after)
        if steps <= 0:
            return base
        aging = self.aging.get(tier.slug)
        if aging is None:
            aging = self.aging[tier.slug] = self._aging(tier, base)
        cap, per_point = aging
        if math.isnan(cap):
            return base
        raised = base + math.floor(steps * tier.aging_step * per_point)
        return max(base, min(raised, cap))

    def _aging(self, tier: TierRule, base: float) -> tuple[float, float]:
        """The cap tier's value and the value per point of score, or NaN without a cap tier
        (kept per tier until the rules change)."""
        caps = [other for other in self.tiers.values() if other.score == tier.aging_cap]
        if not caps or tier.aging_cap is None:
            return math.nan, 0.0
        cap = max(self._value(other) for other in caps)
        gap = tier.aging_cap - tier.score
        return cap, (cap - base) / gap if gap > 0 else 0.0

    def _key(self, j: int, flavor: _Flavor, t: float) -> _Entry:
        return self._full(self._order(j, flavor, t), flavor)

    def _order(self, j: int, flavor: _Flavor, t: float) -> _Entry:
        """``_key`` but its share (-1), computed only when the head is compared across the
        cohort (``_full``): a share changes only with its project's usage, which makes its
        queue stale, so it is the same whenever computed within the candidate's life."""
        job = self.jobs[j]
        quota = flavor.quotas.get(job.project)
        guarantee = quota.guarantee if quota is not None else 0.0
        # The engine's first part of the key (``Replay._key``), inline: the other parts it
        # computes are not this key's.
        borrowing = 1 if flavor.usage.get(job.project, 0.0) + job.gpus > guarantee + EPS else 0
        if not borrowing:
            score, tiers, groups = self.tier[j].score, self.tiers, flavor.groups
            for key in flavor.by_project[job.project]:
                if tiers[key[0]].score > score and groups.get(key):
                    borrowing = 1
                    break
        return (borrowing, -1, -self._priority(j, t), job.arrival, j)

    def _full(self, entry: _Entry, flavor: _Flavor) -> _Entry:
        """The key (``_order``) with its dominant resource share."""
        borrowing, _share, priority, arrival, j = entry
        job = self.jobs[j]
        quota = flavor.quotas.get(job.project)
        weight = quota.fair_share_weight if quota is not None else 1.0
        borrowed = job.gpus if borrowing else 0.0
        for other in self.flavors.values():
            mine = other.quotas.get(job.project)  # none: guaranteed nothing (``_quota``)
            guaranteed = mine.guarantee if mine is not None else 0.0
            borrowed += max(0.0, other.usage.get(job.project, 0.0) - guaranteed)
        lendable = self.lendable
        if lendable is None:
            lendable = self.lendable = sum(other.capacity for other in self.flavors.values())
        drs = int(DRS_SCALE * borrowed / lendable / weight) if lendable and weight > 0 else 0
        return (borrowing, drs, priority, arrival, j)

    def _candidate(self, name: str, flavor: _Flavor, key: tuple[str, str], t: float) -> None:
        """The engine's (``_Admission._candidate``) without what only the engine's pass reads:
        the unswept and within queues, and the aging expiries and wakes (a head's aging
        counts when the requeue looks at it again: see ``_wake``)."""
        entries, stamps = flavor.entries, flavor.stamps
        entries.pop(key, None)
        group = flavor.groups.get(key)
        if not group:
            stamps.pop(key, None)
            return
        pos = self._first_uncapped(flavor, key, group, t)
        if pos >= 0:
            entries[key] = (self._order(group[pos], flavor, t), key, pos)

    def _use(self, flavor: _Flavor, name: str, project: str, delta: float, t: float) -> None:
        super()._use(flavor, name, project, delta, t)
        # The share counts every flavor: the project's queues of the others are ordered anew.
        for other in self.flavors.values():
            if other is not flavor and project in other.by_project:
                other.stale |= other.by_project[project]

    def _stop(self, j: int, t: float) -> None:
        super()._stop(j, t)
        self._requeue_later(self.jobs[j].flavor, t)

    def _preempt(self, v: int, by: int, t: float, why: str) -> None:
        super()._preempt(v, by, t, why)
        self.evicted[v] = t

    def _requeue_later(self, flavor: str, t: float) -> None:
        """Kueue requeues the cohort's inadmissible workloads a batch period after the first
        end (or deletion) it was told of: a delaying queue, later ones join that batch."""
        pool = flavor.partition("/")[0]
        for name in self.flavors:
            if name.partition("/")[0] == pool and name not in self.requeue_at:
                self.requeue_at[name] = t + REQUEUE_BATCH
                self.seq += 1
                heapq.heappush(self.heap, (t + REQUEUE_BATCH, self.seq, _WAKE, -1, 0))
                self.wake_flavor[self.seq] = name

    def _apply(self, rules: Rules, t: float) -> None:
        # A rule switch (a ClusterQueue's update) requeues every inadmissible workload; the
        # engine re-evaluates what waits in the queues and what caps held (``capped``).
        for aside in self.aside.values():
            self.capped |= aside
        self.aside = {}
        self.aging, self.lendable = {}, None
        super()._apply(rules, t)
        self.aging, self.lendable = {}, None

    def _cancel(self, j: int, t: float) -> None:
        for aside in self.aside.values():
            aside.discard(j)
        if math.isnan(self.start[j]):  # a pending Workload deleted: Kueue requeues too
            self._requeue_later(self.jobs[j].flavor, t)
        super()._cancel(j, t)

    def _wake(self, name: str, t: float) -> None:
        """None: every pass ends with each queue empty or held by its caps (every head that
        does not start is set aside), so a pass that only a wake would bring (an aging step,
        a reclaim's grace, protected victims) would look at nothing; the heads set aside are
        looked at again at the requeue, their priorities aged to then."""

    def _requeue(self, name: str, aside: set[int], t: float) -> None:
        """The flavor's inadmissible heads back into their queues (the batch is due), each
        after the jobs of its queue that arrived no later (a queue is in arrival order). The
        pass that requeues looks at them: no other pass is asked for (it would find each queue
        empty or held by its caps)."""
        jobs, flavor = self.jobs, self.flavors[name]
        groups = flavor.groups
        coming: dict[tuple[str, str], list[int]] = {}
        for j in sorted(aside, key=lambda j: (jobs[j].arrival, j)):
            coming.setdefault((self.tier[j].slug, jobs[j].project), []).append(j)
        for key, heads in coming.items():
            group = groups.get(key)
            if group is not None:
                groups[key] = deque(sorted(chain(group, heads), key=lambda k: jobs[k].arrival))
                flavor.stale.add(key)
                continue
            # ``_enqueue`` inline: the rules are those they were set aside under (``_apply``),
            # so their tier and class are those resolved then, and no cap per job holds them.
            groups[key] = deque(heads)
            flavor.by_project.setdefault(key[1], set()).add(key)
            flavor.stale |= flavor.by_project[key[1]]  # its lower tiers wait behind it
            tier = self.tier[heads[0]]
            if tier.max_gpus_total is not None or tier.max_gpus_per_user is not None:
                self.by_tier.setdefault(tier.slug, set()).add((name, key))

    def _pool(self, name: str) -> list[str]:
        """The flavors of ``name``'s pool (one cohort: a project's ClusterQueue covers them
        all), in a fixed order; the same in every period of the timeline."""
        pool = name.partition("/")[0]
        names = self.pools.get(pool)
        if names is None:
            names = self.pools[pool] = sorted(
                other for other in self.flavors if other.partition("/")[0] == pool
            )
        return names

    def _pool_live(
        self, names: Sequence[str], t: float, due: Mapping[str, set[int]] | None = None
    ) -> tuple[set[int] | None, dict[str, _Told]]:
        """``_live`` over the pool's flavors (with ``due`` put back): the jobs that could do
        more than be set aside (None: not told), and per flavor what ``_settle`` needs."""
        live: set[int] = set()
        told: dict[str, _Told] = {}
        for name in names:
            said = self._live(self.flavors[name], t, due.get(name, ()) if due else ())
            if said is None:
                return None, told
            told[name] = said
            live |= said[0]
        return live, told

    def _due(self, names: Sequence[str], t: float) -> set[int] | Literal[False] | None:
        """The pool's requeue, if the batch is due. False when it settled the pass
        (``_settle``): no head set aside, nor any job the pass would look at, in any flavor
        of the pool, could do more than be set aside again (or stay held by its cap), so
        they are not put back; else the jobs that could (``_live``; None: not told)."""
        due: dict[str, set[int]] = {}
        for name in names:
            if self.requeue_at.get(name, math.inf) > t:
                continue
            del self.requeue_at[name]
            aside = self.aside.pop(name, None)
            if aside:
                due[name] = aside
        if not due:
            return None
        live, told = self._pool_live(names, t, due)
        if live is None or live:
            for name, aside in due.items():
                self._requeue(name, aside, t)
            return live
        self.aside.update(due)
        for name in names:
            self._settle(name, self.flavors[name], told[name][1], told[name][2])
        return False

    def _refresh(self, name: str, flavor: _Flavor, tried: set[str], t: float) -> None:
        """The next candidate of each stale queue, but of a ClusterQueue tried this cycle."""
        if tried:
            stale = [key for key in flavor.stale if key[1] not in tried]
            if not stale:
                return
            flavor.stale.difference_update(stale)
        else:
            stale, flavor.stale = list(flavor.stale), set()
        groups, entries = flavor.groups, flavor.entries
        looks = []
        for key in stale:
            if groups.get(key):
                looks.append(key)
            else:  # ``_candidate`` of an empty queue, inline (the common case): no order
                entries.pop(key, None)
                flavor.stamps.pop(key, None)
        for key in sorted(looks):  # in a fixed order (the reasons a look says)
            self._candidate(name, flavor, key, t)

    def _cycle_heads(self, names: Sequence[str], tried: set[str]) -> list[_Head]:
        """Each ClusterQueue's head over all the pool's flavors (Kueue's heap of the queue:
        its first job by priority, then arrival); none of a project whose head this cycle
        already took."""
        heads: dict[str, _Head] = {}
        for name in names:
            for key, (entry, _key, pos) in self.flavors[name].entries.items():
                project = key[1]
                if project in tried:
                    continue
                best = heads.get(project)
                if best is None or (entry[2], entry[3], entry[4]) < (
                    best[0][2],
                    best[0][3],
                    best[0][4],
                ):
                    heads[project] = (entry, name, key, pos)
        return list(heads.values())

    def _pass(self, name: str, t: float) -> None:
        """A pass over the pool (the cohort): cycle by cycle, one head per ClusterQueue over
        all its flavors, in the fair-sharing order, until every queue is empty or held."""
        names = self._pool(name)
        self.dirty.difference_update(names)
        due = self._due(names, t)
        if due is not False:
            self._cycles(names, due, t)
        for other in names:
            flavor = self.flavors[other]
            flavor.unswept = set()
            flavor.blocker = None

    def _cycles(self, names: Sequence[str], live: set[int] | None, t: float) -> None:
        """The pass's cycles. ``live``: after a requeue, the jobs that could do more than be
        set aside (``_live``, told before they were put back: the caps said since may leave
        fewer), told again when a job starts or once those were tried; None: not told."""
        flavors = [(other, self.flavors[other]) for other in names]
        tried: set[str] = set()  # the projects (ClusterQueues) whose head this cycle took
        # The free GPUs as the cycle's snapshot saw them: a head that fitted then but no
        # longer does (another head of the cycle took them) is skipped, not set aside, and
        # stays its queue's head for the next cycle (Kueue requeues it at once).
        snapshot = {other: flavor.free for other, flavor in flavors}
        tell = False
        while True:
            # A queue tried this cycle offers its next head at the next one.
            for other, flavor in flavors:
                if flavor.stale:
                    self._refresh(other, flavor, tried, t)
            if tell:
                tell = False
                live, told = self._pool_live(names, t)
                if live is not None and not live:
                    for other, flavor in flavors:
                        self._settle(other, flavor, told[other][1], told[other][2])
                    return
            heads = self._cycle_heads(names, tried)
            if not heads:
                if not tried:
                    return
                tried = set()  # the next cycle
                snapshot = {other: flavor.free for other, flavor in flavors}
                continue
            if live is not None and not any(
                self.flavors[other].groups[key][pos] in live for _, other, key, pos in heads
            ):
                # No head left in this cycle could do more than be set aside (or be skipped,
                # having fitted the cycle's snapshot): all are, in any order (their order by
                # fair sharing decides nothing).
                for entry, other, key, pos in heads:
                    tried.add(key[1])
                    flavor = self.flavors[other]
                    j = flavor.groups[key][pos]
                    if self.jobs[j].gpus <= snapshot[other] + EPS:
                        self._head(j, entry, flavor, other, key, snapshot[other], t)
                        continue
                    del flavor.entries[key]
                    self._set_aside(j, flavor, other, key)
                continue
            for n, (entry, other, key, pos) in enumerate(heads):
                if entry[1] < 0:  # its share (``_order``), computed once
                    flavor = self.flavors[other]
                    entry = self._full(entry, flavor)
                    flavor.entries[key] = (entry, key, pos)
                    heads[n] = (entry, other, key, pos)
            entry, other, key, pos = min(heads)
            tried.add(key[1])
            flavor = self.flavors[other]
            j = flavor.groups[key][pos]
            if self._head(j, entry, flavor, other, key, snapshot[other], t):
                tell = live is not None  # (``live`` told anew)
            elif live is not None and j in live and key not in flavor.entries:
                # Set aside. A skipped head stays live: its queue's head at the next cycle.
                live.discard(j)
                tell = not live

    def _head(
        self,
        j: int,
        entry: _Entry,
        flavor: _Flavor,
        name: str,
        key: tuple[str, str],
        seen: float,
        t: float,
    ) -> bool:
        """The cycle's look at head ``j``: admitted (True), or skipped, or set aside.
        ``seen``: the flavor's free GPUs when the cycle began."""
        gpus = self.jobs[j].gpus
        lending = self._lending(j, flavor)
        # A workload evicted in this instant is pending again only once its eviction is
        # done (its pods gone, a second or more on Kueue): it preempts nothing before.
        fair = self.fair and self.evicted.get(j) != t
        if lending == LENDING and not (fair and self._try_fair(j, flavor, name, t)):
            self._say(j, LENDING, t)
            del flavor.entries[key]
            self._set_aside(j, flavor, name, key)
            return False
        if lending == LENDING or (lending is None and flavor.free + EPS >= gpus):
            self._begin(j, flavor, name, t)  # (held by lending: its targets preempted)
            return True
        if flavor.free + EPS < gpus <= seen + EPS:
            # It fitted the cycle's snapshot: skipped ("no longer fits after processing
            # another workload"), back at once in its queue, its head at the next cycle.
            self._say(j, RESOURCES, t)
            return False
        if (fair and self._try_fair(j, flavor, name, t)) or (
            not self.fair
            and self.evicted.get(j) != t
            and (
                (lending is None and self._try_preempt(j, flavor, name, t))
                or (entry[0] == 0 and self._try_reclaim(j, flavor, name, t))
            )
        ):
            self._begin(j, flavor, name, t)
            return True
        self._say(j, RESOURCES, t)
        del flavor.entries[key]
        self._set_aside(j, flavor, name, key)
        return False
