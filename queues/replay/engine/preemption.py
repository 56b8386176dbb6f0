"""Preemption: a tier's preemption of lower tiers, and reclaim of borrowed GPUs after the grace."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

from ..rules import CAUTIOUS, FORBIDDEN
from .admission import _Admission
from .vocabulary import (
    DAY,
    EPS,
    _Flavor,
)


class _Preemption(_Admission):
    """``Replay``'s preemption: a tier's preemption of lower tiers, and reclaim of borrowed
    GPUs after the grace."""

    def _preemptible(self, v: int, t: float) -> tuple[bool, float]:
        """Whether ``v`` may be preempted at ``t``; else when it may again (inf: never)."""
        cls = self.cls[v]
        if cls.kind == FORBIDDEN:
            return False, math.inf
        if cls.max_per_day is not None:
            day = int(t // DAY)
            counted_day, count = self.day_count.get(v, (day, 0))
            if counted_day == day and count >= cls.max_per_day:
                return False, (day + 1) * DAY
        if cls.kind == CAUTIOUS and t - self.run_start[v] < cls.min_runtime:
            return False, self.run_start[v] + cls.min_runtime
        return True, t

    def _preempt(self, v: int, by: int, t: float, why: str) -> None:
        self._stop(v, t)
        self.token[v] += 1  # its end, as planned, will not come
        cls = self.cls[v]
        ran = t - self.run_start[v]
        lost = ran if cls.checkpoint_interval is None else ran % cls.checkpoint_interval
        self.remaining[v] = self.remaining[v] - ran + lost + self.rules.requeue_cost
        self.lost[v] += (lost + self.rules.requeue_cost) * self.jobs[v].gpus
        self.preemptions[v] += 1
        day = int(t // DAY)
        counted_day, count = self.day_count.get(v, (day, 0))
        self.day_count[v] = (day, count + 1 if counted_day == day else 1)
        self.preempted_by.append((v, by, t, why))
        self.victim_at[v] = t
        self.reason[v] = None
        self._enqueue(v, t, fresh=False)

    def _victims(
        self, j: int, flavor: _Flavor, candidates: list[int], t: float
    ) -> tuple[list[int] | None, float]:
        """Enough preemptible jobs among ``candidates`` (in preference order) to fit ``j``.

        A job preempted in this instant is not a victim again in it: two rules that each
        take the other's job (a tier's preemption and a guarantee's reclaim, possible when
        the guarantees exceed the pool) would otherwise trade it back and forth forever in
        one instant. It may lose its GPUs again at any later instant."""
        need = self.jobs[j].gpus - flavor.free
        chosen: list[int] = []
        retry = math.inf
        for v, again in self._eligible(candidates, t):
            if again is not None:
                retry = min(retry, again)
                continue
            chosen.append(v)
            need -= self.jobs[v].gpus
            if need <= EPS:
                return chosen, retry
        return None, retry

    def _eligible(self, candidates: Iterable[int], t: float) -> Iterator[tuple[int, float | None]]:
        """Each candidate that may lose its GPUs now, with None; one that may not until
        later, with when (inf: never). A job preempted in this instant is left out."""
        victim_at = self.victim_at
        for v in candidates:
            if victim_at.get(v) == t:
                continue
            ok, again = self._preemptible(v, t)
            yield v, None if ok else again

    def _try_preempt(self, j: int, flavor: _Flavor, name: str, t: float) -> bool:
        tier = self.tier[j]
        if not tier.may_preempt or not tier.preemptible:
            return False
        gpus = self.jobs[j].gpus
        lower = sum(flavor.tier_running.get(slug, 0.0) for slug in tier.preemptible)
        if lower + flavor.free + EPS < gpus:
            return False
        held = self.no_victims.get((j, "tier"))
        if held is not None and t < held[0] and flavor.free <= held[1] + EPS:
            return False  # its possible victims are all protected until then
        candidates = [v for v in flavor.running if self.tier[v].slug in tier.preemptible]
        candidates.sort(key=lambda v: (self.tier[v].score, -self.run_start[v], -v))
        victims, retry = self._victims(j, flavor, candidates, t)
        if victims is None:
            self.no_victims[j, "tier"] = (retry, flavor.free)
            if retry < math.inf:
                self._wake(name, retry)
            return False
        self.no_victims.pop((j, "tier"), None)
        for v in victims:
            self._preempt(v, j, t, "tier")
        return True

    def _try_reclaim(self, j: int, flavor: _Flavor, name: str, t: float) -> bool:
        job = self.jobs[j]
        quota = flavor.quotas.get(job.project)
        if quota is None or flavor.usage.get(job.project, 0.0) + job.gpus > quota.guarantee + EPS:
            return False
        if flavor.borrowed <= EPS:
            return False
        asked = self.ask.setdefault(j, t)
        due = asked + quota.reclaim_grace
        if t + EPS < due:
            self._wake(name, due)
            return False
        # Its own memo, not tier preemption's: the borrowers are other victims than the
        # lower tiers (a never-preempt lower tier must not hold a reclaim from a borrower).
        held = self.no_victims.get((j, "reclaim"))
        if held is not None and t < held[0] and flavor.free <= held[1] + EPS:
            return False
        over = {
            project: used - self._quota(flavor, project).guarantee
            for project, used in flavor.usage.items()
        }
        borrowers = [v for v in flavor.running if over.get(self.jobs[v].project, 0.0) > EPS]
        borrowers.sort(
            key=lambda v: (
                -over[self.jobs[v].project],
                self.tier[v].score,
                -self.run_start[v],
                -v,
            )
        )
        victims, retry = self._victims(j, flavor, borrowers, t)
        if victims is None:
            self.no_victims[j, "reclaim"] = (retry, flavor.free)
            if retry < math.inf:
                self._wake(name, retry)
            return False
        self.no_victims.pop((j, "reclaim"), None)
        for v in victims:
            self._preempt(v, j, t, "reclaim")
        return True
