"""One look for fair-sharing preemption targets in the Kueue replay model (no Django).

``kueue_fair`` finds the targets; an ``_Attempt`` holds what one look simulates: the flavor's
usage as targets are taken, the queues' dominant resource shares (``dominantResourceShare``)
and the preemptor's ``Available`` (``workloadFitsForFairSharing``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

from .engine import EPS
from .engine.vocabulary import _Flavor
from .rules import Job, QuotaRule

_Share = tuple[bool, float]  # (zero weight and borrowing, share): ordered as ``CompareDRS``
_NOT_BORROWING: _Share = (False, 0.0)
_Static = tuple[list[_Flavor], dict[str, float], float, dict[str, tuple[float, float]]]
FIT_MARGIN = 1e-6  # GPUs: ``may_fit``'s bound is sure beyond rounding


def _local(quota: QuotaRule | None) -> float:
    """The part of a nominal quota its lending limit keeps from the cohort (``localQuota``)."""
    if quota is None or quota.lending_limit is None:
        return 0.0
    return max(0.0, quota.guarantee - quota.lending_limit)


class _Model(Protocol):
    """What a look reads of the replay (``kueue_fair._FairSharing``)."""

    jobs: Sequence[Job]

    def _quota(self, flavor: _Flavor, project: str) -> QuotaRule: ...
    def _fair_static(self, flavor: _Flavor, name: str) -> _Static: ...
    def _fair_lendable(self, pool: str) -> float: ...
    def _fair_weight(self, project: str, pool: str) -> float: ...
    def _fair_borrow_limit(self, quota: QuotaRule | None) -> float | None: ...


class _Attempt:
    """One look for targets (``fairPreemptions``): the flavor's usage as simulated, the
    candidates per ClusterQueue, the targets taken."""

    def __init__(self, model: _Model, j: int, flavor: _Flavor, name: str) -> None:
        self.model, self.flavor = model, flavor
        job = model.jobs[j]
        self.project, self.gpus = job.project, job.gpus
        self.pool = name.partition("/")[0]
        self.use = dict(flavor.usage)
        static = model._fair_static(flavor, name)
        # The pool's other flavors; per flavor's quota its part kept from the cohort; the
        # cohort's GPUs less those parts; per queue its nominal quota here and its weight.
        self.others, self.local_of, self.subtree, self.per_queue = static
        self.lendable = model._fair_lendable(self.pool)
        self.targets: list[int] = []
        self.fixed: dict[str, tuple[float, float, float]] = {}
        self.shares: dict[str, _Share] = {}  # ``current``'s, until the queue's usage changes
        quota = flavor.quotas.get(self.project)
        self.local = _local(quota)
        self.guarantee = quota.guarantee if quota is not None else 0.0
        self.limit = model._fair_borrow_limit(quota)

    def share(self, project: str) -> _Share:
        """The queue's dominant resource share now (``dominantResourceShare``)."""
        fixed = self.fixed.get(project)
        if fixed is None:
            fixed = self._fixed(project)
        elsewhere, guarantee, weight = fixed
        over = elsewhere + max(0.0, self.use.get(project, 0.0) - guarantee)
        if over <= EPS:
            return _NOT_BORROWING
        ratio = over * 1000.0 / self.lendable if self.lendable > 0 else 0.0
        if weight <= 0:
            return (True, ratio)
        return (False, ratio / weight)

    def current(self, project: str) -> _Share:
        """``share``, kept while the look takes no target of the queue (``remove``)."""
        share = self.shares.get(project)
        if share is None:
            share = self.shares[project] = self.share(project)
        return share

    def _fixed(self, project: str) -> tuple[float, float, float]:
        """What of a queue's share the look does not change: its GPUs above its nominal
        quota on the pool's other flavors, its nominal quota here, its weight."""
        model = self.model
        over = 0.0
        for other in self.others:
            used = other.usage.get(project, 0.0)
            if used > 0:
                over += max(0.0, used - model._quota(other, project).guarantee)
        per_queue = self.per_queue.get(project)
        if per_queue is None:
            per_queue = self.per_queue[project] = (
                model._quota(self.flavor, project).guarantee,
                model._fair_weight(project, self.pool),
            )
        fixed = self.fixed[project] = (over, *per_queue)
        return fixed

    def available(self) -> float:
        """The preemptor's ClusterQueue's ``Available`` on the flavor (a flat cohort)."""
        subtree, local_of = self.subtree, self.local_of
        usage = 0.0
        for project, used in self.use.items():
            if used > 0:
                usage += max(0.0, used - local_of.get(project, 0.0))
        parent = subtree - usage
        local, used = self.local, self.use.get(self.project, 0.0)
        if self.limit is not None:
            parent = min(self.guarantee - local - max(0.0, used - local) + self.limit, parent)
        return max(0.0, max(0.0, local - used) + parent)

    def fits(self) -> bool:
        """With the preemptor's own usage taken out again (``workloadFitsForFairSharing``)."""
        self.use[self.project] -= self.gpus
        fits = self.gpus <= self.available() + EPS
        self.use[self.project] += self.gpus
        return fits

    def remove(self, v: int) -> None:
        job = self.model.jobs[v]
        self.use[job.project] = self.use.get(job.project, 0.0) - job.gpus
        self.shares.pop(job.project, None)
        self.targets.append(v)

    def next_queue(
        self, lists: dict[str, deque[int]], pruned: set[str], order: Callable[[int], tuple]
    ) -> str | None:
        """The ClusterQueue to take a target from next: the highest share (``nextTarget``)."""
        best: str | None = None
        best_share: _Share = (False, -1.0)
        for project, candidates in lists.items():
            if project in pruned:
                continue
            share = self.current(project)
            if (share == _NOT_BORROWING and project != self.project) or not candidates:
                pruned.add(project)
                continue
            if best is None or share > best_share:
                best, best_share = project, share
            elif share == best_share and order(candidates[0]) < order(lists[best][0]):
                best = project
        return best

    def may_fit(self, taken: dict[str, float]) -> bool:
        """Whether the preemptor would fit with every candidate taken (per queue their GPUs;
        ``Available`` only grows as targets are taken): if not, no strategy can find targets
        enough. A margin above ``EPS`` keeps it a sure bound whatever the order the GPUs are
        summed in."""
        use = self.use
        saved = {project: use[project] for project in taken if project in use}
        for project, gpus in taken.items():
            use[project] = use.get(project, 0.0) - gpus
        available = self.available()
        for project in taken:
            if project in saved:
                use[project] = saved[project]
            else:
                del use[project]
        return self.gpus <= available + EPS + FIT_MARGIN
