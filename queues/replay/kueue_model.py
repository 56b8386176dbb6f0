"""The replay as Kueue 0.17 admits: ``BestEffortFIFO`` queues (no Django).

The engine (``queues.replay.engine``) orders work as Kueue does — within the guarantee
first, then the tier (WorkloadPriorityClass), fair share, arrival — but keeps that order
strictly: when the first job does not fit, no later borrowing job of its flavor starts.
Kueue's ``BestEffortFIFO`` queues (Arbiter's LocalQueues and ClusterQueues use the default)
do not: a head that does not fit and cannot preempt is set aside (inadmissible) and the next
workload is tried, in its own ClusterQueue and in the others of the cohort, so smaller or
lower work is admitted past it — as measured on the lab's Kueue (``bench/replay_fidelity.py
--scheduler kueue``). ``KueueReplay`` is the engine with that difference: a job that neither
fits nor preempts nor reclaims is passed over for this scheduling pass and, once every other
queue's head was looked at (a cycle takes one head per queue), the next job of its queue that
fits (within its caps and what the cohort lends) is admitted instead; the passed-over heads
are looked at again at the next pass (an end, an arrival).

And fair sharing (on in Arbiter's Kueue configuration) orders the cohort's queues before
priority does: of the heads of the cohort's ClusterQueues, the one whose queue would have the
lowest dominant resource share with it admitted goes first (GPUs borrowed above its
guarantees over all flavors, per unit of fair-share weight), then the higher priority, then
the earlier. Within a project's queue the tier orders, as in the engine.
"""

from __future__ import annotations

from itertools import islice

from .engine import EPS, LENDING, QUEUE_DEPTH, RESOURCES, Replay
from .engine.vocabulary import _Flavor

DRS_SCALE = 1000  # Kueue's dominant resource share is an integer in thousandths


class KueueReplay(Replay):
    def _key(self, j: int, flavor: _Flavor, t: float) -> tuple[int, int, float, float, int]:
        borrowing, score, _share, arrival, _j = super()._key(j, flavor, t)
        job = self.jobs[j]
        quota = flavor.quotas.get(job.project)
        weight = quota.fair_share_weight if quota is not None else 1.0
        borrowed = job.gpus if borrowing else 0.0
        lendable = 0.0
        for other in self.flavors.values():
            mine = self._quota(other, job.project)
            borrowed += max(0.0, other.usage.get(job.project, 0.0) - mine.guarantee)
            lendable += other.capacity
        drs = int(DRS_SCALE * borrowed / lendable / weight) if lendable and weight > 0 else 0
        return (borrowing, drs, float(score), arrival, j)

    def _use(self, flavor: _Flavor, name: str, project: str, delta: float, t: float) -> None:
        super()._use(flavor, name, project, delta, t)
        # The share counts every flavor: the project's queues of the others are ordered anew.
        for other in self.flavors.values():
            if other is not flavor and project in other.by_project:
                other.stale |= other.by_project[project]

    def _pass(self, name: str, t: float) -> None:
        flavor = self.flavors[name]
        if t >= flavor.next_expiry:
            flavor.stale |= {key for key, until in flavor.expiry.items() if until <= t}
            for key in [key for key, until in flavor.expiry.items() if until <= t]:
                del flavor.expiry[key]
            flavor.next_expiry = min(flavor.expiry.values(), default=float("inf"))
        if flavor.held:
            flavor.stale |= flavor.held
            flavor.held = set()
        entries = flavor.entries
        passed: set[tuple[str, str]] = set()
        deferred: dict[tuple[str, str], int] = {}
        aside: dict[
            tuple[str, str], tuple[tuple[int, int, float, float, int], tuple[str, str], int]
        ] = {}
        while True:
            if flavor.stale:
                stale = sorted(flavor.stale - passed)
                flavor.stale = set()
                for key in stale:
                    self._candidate(name, flavor, key, t)
            if not entries:
                # A cycle takes one head per queue: only once every head was looked at do
                # the queues whose head did not fit offer their next job (one per round).
                started = False
                for key, pos in sorted(deferred.items()):
                    other = self._next_fitting(flavor, key, pos)
                    if other is not None:
                        self._begin(other, flavor, name, t)
                        started = True
                if not started:
                    break
                continue
            entry, key, pos = min(entries.values())
            j = flavor.groups[key][pos]
            lending = self._lending(j, flavor)
            if lending == LENDING:
                self._say(j, LENDING, t)
                del entries[key]
                flavor.held.add(key)
                continue
            if lending is None and flavor.free + EPS >= self.jobs[j].gpus:
                self._begin(j, flavor, name, t)
                continue
            if (lending is None and self._try_preempt(j, flavor, name, t)) or (
                entry[0] == 0 and self._try_reclaim(j, flavor, name, t)
            ):
                self._begin(j, flavor, name, t)
                continue
            self._say(j, RESOURCES, t)
            aside[key] = entries.pop(key)  # back in the entries at the next pass
            passed.add(key)
            deferred[key] = pos
        # The heads set aside are looked at again at the next pass: as they were, unless
        # their queue changed meanwhile (then it is stale and found again).
        for key, value in aside.items():
            if key in flavor.stale or key not in flavor.groups:
                continue
            entries[key] = value
        flavor.unswept = set()
        flavor.blocker = None

    def _next_fitting(self, flavor: _Flavor, key: tuple[str, str], pos: int) -> int | None:
        """The first job after ``pos`` in queue ``key`` that fits now, within its caps."""
        group = flavor.groups.get(key)
        if not group:
            return None
        jobs = self.jobs
        tier = self.tier[group[pos]]
        quota = self._quota(flavor, key[1])
        used = flavor.usage.get(key[1], 0.0)
        left = flavor.free
        if tier.max_gpus_total is not None:
            left = min(left, tier.max_gpus_total - self.tier_use.get(tier.slug, 0.0))
        if quota.maximum is not None:
            left = min(left, quota.maximum - used)
        for j in islice(group, pos + 1, QUEUE_DEPTH):
            gpus = jobs[j].gpus
            if gpus > left + EPS:
                continue
            cap = tier.max_gpus_per_user
            if cap is not None and self.user_use.get((jobs[j].user, tier.slug), 0.0) + gpus > cap:
                continue
            if self._lending(j, flavor) is None:
                return j
        return None
