"""Kueue 0.17's fair-sharing preemption in the Kueue replay model (no Django).

With fair sharing on (Arbiter's Kueue configuration: ``preemptionStrategies:
[LessThanOrEqualToFinalShare, LessThanInitialShare]``) Kueue finds every preemption target
with ``fairPreemptions`` (``pkg/scheduler/preemption/preemption.go``, ``fairsharing/``,
``common/ordering.go``; shares from ``pkg/cache/scheduler/fair_sharing.go``): candidates are
its own ClusterQueue's lower priorities (``withinClusterQueue: LowerPriority``) and, with
``reclaimWithinCohort: Any``, every workload of another ClusterQueue borrowing on the flavor,
whatever its priority; the preemptor's workload counted in its queue's share; the queue with
the highest dominant resource share first (GPUs above nominal over the cohort's flavors ×
1000 / the GPUs lendable in the cohort / the weight); a candidate taken when the preemptor's
share is ≤ the target's after the removal, or unconditionally while the preemptor stays
within its nominal quota (``FairSharingPreemptWithinNominal``, on in 0.17); refused ones
retried, one per queue, when the preemptor's share is < the target's; until it fits, then
targets not needed put back (``fillBackWorkloads``). docs/replay.md says it in full, and
what is not modelled.

``KueueSettings`` switches it: fair sharing on, both strategies, and each ClusterQueue's
``reclaimWithinCohort`` and ``withinClusterQueue`` as Arbiter's export writes them, unless a
run (the lab's scenario) names its own.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .engine import EPS, LENDING, RESOURCES, Replay
from .engine.vocabulary import _Flavor
from .rules import FORBIDDEN, Job, QuotaRule, Rules

LESS_OR_EQUAL_FINAL = "LessThanOrEqualToFinalShare"
LESS_INITIAL = "LessThanInitialShare"
ANY = "Any"
NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
_Share = tuple[bool, float]  # (zero weight and borrowing, share): ordered as ``CompareDRS``
_NOT_BORROWING: _Share = (False, 0.0)


@dataclass(frozen=True)
class KueueSettings:
    """What the Kueue model takes from Kueue's configuration and the ClusterQueues.

    ``fair_sharing``: Kueue's ``fairSharing`` is set (Arbiter's configuration); off, the model
    preempts as the engine does (tiers, and reclaim after the grace). ``strategies``: its
    ``preemptionStrategies``. ``reclaim`` / ``within``: per project (its ClusterQueue in each
    pool) ``reclaimWithinCohort`` (``Any`` or ``Never``) and ``withinClusterQueue``
    (``LowerPriority`` or ``Never``); a project not named gets what Arbiter's export writes:
    ``Any`` when it has a guarantee in the pool, ``LowerPriority`` when its top tier may
    preempt and no quota of it in the pool is never-preempt."""

    fair_sharing: bool = True
    strategies: tuple[str, ...] = (LESS_OR_EQUAL_FINAL, LESS_INITIAL)
    reclaim: Mapping[str, str] | None = None
    within: Mapping[str, str] | None = None


def _less_or_equal_final(preemptor: _Share, _old: _Share, new: _Share) -> bool:
    return preemptor <= new


def _less_initial(preemptor: _Share, old: _Share, _new: _Share) -> bool:
    return preemptor < old


STRATEGIES: dict[str, Callable[[_Share, _Share, _Share], bool]] = {
    LESS_OR_EQUAL_FINAL: _less_or_equal_final,
    LESS_INITIAL: _less_initial,
}


def _local(quota: QuotaRule | None) -> float:
    """The part of a nominal quota its lending limit keeps from the cohort (``localQuota``)."""
    if quota is None or quota.lending_limit is None:
        return 0.0
    return max(0.0, quota.guarantee - quota.lending_limit)


class _Attempt:
    """One look for targets (``fairPreemptions``): the flavor's usage as simulated, the
    candidates per ClusterQueue, the targets taken."""

    def __init__(self, model: _FairSharing, j: int, flavor: _Flavor, name: str) -> None:
        self.model, self.flavor = model, flavor
        job = model.jobs[j]
        self.project, self.gpus = job.project, job.gpus
        self.pool = name.partition("/")[0]
        self.use = dict(flavor.usage)
        # Each queue's GPUs above its nominal quota on the pool's other flavors (unchanged).
        self.elsewhere: dict[str, float] = {}
        self.others = [
            other
            for key, other in model.flavors.items()
            if other is not flavor and key.partition("/")[0] == self.pool
        ]
        self.lendable = model._fair_lendable(self.pool)
        self.targets: list[int] = []

    def share(self, project: str) -> _Share:
        """The queue's dominant resource share now (``dominantResourceShare``)."""
        model = self.model
        over = self.elsewhere.get(project)
        if over is None:
            over = 0.0
            for other in self.others:
                used = other.usage.get(project, 0.0)
                if used > 0:
                    over += max(0.0, used - model._quota(other, project).guarantee)
            self.elsewhere[project] = over
        over += max(0.0, self.use.get(project, 0.0) - model._quota(self.flavor, project).guarantee)
        if over <= EPS:
            return _NOT_BORROWING
        ratio = over * 1000.0 / self.lendable if self.lendable > 0 else 0.0
        weight = model._fair_weight(project, self.pool)
        if weight <= 0:
            return (True, ratio)
        return (False, ratio / weight)

    def available(self) -> float:
        """The preemptor's ClusterQueue's ``Available`` on the flavor (a flat cohort)."""
        flavor, model = self.flavor, self.model
        subtree, usage = flavor.unguaranteed, 0.0
        for rule in flavor.quotas.values():
            subtree += rule.guarantee - _local(rule)
        for project, used in self.use.items():
            if used > 0:
                usage += max(0.0, used - _local(flavor.quotas.get(project)))
        parent = subtree - usage
        quota = flavor.quotas.get(self.project)
        local = _local(quota)
        used = self.use.get(self.project, 0.0)
        limit = model._fair_borrow_limit(quota)
        if limit is not None:
            guarantee = quota.guarantee if quota is not None else 0.0
            parent = min(guarantee - local - max(0.0, used - local) + limit, parent)
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
            share = self.share(project)
            if (share == _NOT_BORROWING and project != self.project) or not candidates:
                pruned.add(project)
                continue
            if best is None or share > best_share:
                best, best_share = project, share
            elif share == best_share and order(candidates[0]) < order(lists[best][0]):
                best = project
        return best


class _FairSharing(Replay):
    """``KueueReplay``'s preemption when Kueue's fair sharing is on (``_try_fair``)."""

    kueue: KueueSettings

    def __init__(
        self,
        jobs: Sequence[Job],
        timeline: Sequence[tuple[float, Rules]],
        settings: KueueSettings | None = None,
    ) -> None:
        super().__init__(jobs, timeline)
        self.kueue = settings or KueueSettings()
        self.fair = self.kueue.fair_sharing
        for strategy in self.kueue.strategies:
            if strategy not in STRATEGIES:
                raise ValueError(f"unknown fair-sharing preemption strategy {strategy!r}")
        # Per pool a count of every change of usage: a look that found no targets is not
        # repeated before it changes (nor before a protected candidate may be taken).
        self.fair_version: dict[str, int] = {}
        self.fair_failed: dict[tuple[str, str, float, float], tuple[int, float]] = {}
        self.fair_pool: dict[str, tuple[float, dict[str, float]]] = {}
        self.fair_evicted: dict[int, float] = {}  # a victim: when it was preempted

    def _priority(self, j: int, t: float) -> float:  # ``KueueReplay``'s
        raise NotImplementedError

    def _apply(self, rules: Rules, t: float) -> None:
        self.fair_failed, self.fair_pool = {}, {}
        super()._apply(rules, t)
        self.fair_failed, self.fair_pool = {}, {}

    def _use(self, flavor: _Flavor, name: str, project: str, delta: float, t: float) -> None:
        super()._use(flavor, name, project, delta, t)
        pool = name.partition("/")[0]
        self.fair_version[pool] = self.fair_version.get(pool, 0) + 1

    # -- the ClusterQueues as Arbiter exports them ------------------------------------------

    def _pool_quotas(self, pool: str, project: str) -> list[QuotaRule]:
        return [
            quota
            for key, flavor in self.flavors.items()
            if key.partition("/")[0] == pool
            for quota in (flavor.quotas.get(project),)
            if quota is not None
        ]

    def _fair_reclaims(self, project: str, pool: str) -> bool:
        named = self.kueue.reclaim
        if named is not None and project in named:
            return named[project] != NEVER
        return any(quota.guarantee > 0 for quota in self._pool_quotas(pool, project))

    def _fair_within(self, project: str, pool: str) -> bool:
        named = self.kueue.within
        if named is not None and project in named:
            return named[project] != NEVER
        rules = self.rules
        top = self.tiers.get(rules.project_tiers.get(project, ""), self.default_tier)
        if not top.may_preempt:
            return False
        for quota in self._pool_quotas(pool, project):
            cls = self.classes.get(quota.preemption_class) if quota.preemption_class else None
            if (cls or self.default_class).kind == FORBIDDEN:
                return False
        return True

    def _fair_borrow_limit(self, quota: QuotaRule | None) -> float | None:
        """The queue's ``borrowingLimit`` on the flavor: 0 for never-preempt work."""
        if quota is None:
            return None if self.default_class.kind != FORBIDDEN else 0.0
        cls = self.classes.get(quota.preemption_class) if quota.preemption_class else None
        if (cls or self.default_class).kind == FORBIDDEN:
            return 0.0
        return quota.borrow_limit

    def _fair_cohort(self, pool: str) -> tuple[float, dict[str, float]]:
        """The GPUs lendable in the pool's cohort, and per project its ``fairSharing.weight``
        (the quotas' weights averaged by guarantee, as the export writes it)."""
        cached = self.fair_pool.get(pool)
        if cached is not None:
            return cached
        lendable = 0.0
        weights: dict[str, list[tuple[float, float]]] = {}
        for key, flavor in self.flavors.items():
            if key.partition("/")[0] != pool:
                continue
            lendable += flavor.unguaranteed
            for project, quota in flavor.quotas.items():
                lendable += quota.guarantee - _local(quota)
                weights.setdefault(project, []).append((quota.fair_share_weight, quota.guarantee))
        per_project = {}
        for project, pairs in weights.items():
            total = sum(guarantee for _, guarantee in pairs)
            if total:
                per_project[project] = sum(w * g for w, g in pairs) / total
            else:
                per_project[project] = sum(w for w, _ in pairs) / len(pairs)
        cached = self.fair_pool[pool] = (lendable, per_project)
        return cached

    def _fair_lendable(self, pool: str) -> float:
        return self._fair_cohort(pool)[0]

    def _fair_weight(self, project: str, pool: str) -> float:
        return self._fair_cohort(pool)[1].get(project, 1.0)

    # -- the look for targets -----------------------------------------------------------------

    def _fair_by_priority(self, project: str, flavor: _Flavor) -> bool:
        """Whether a look for targets of the project's work on ``flavor`` depends on the
        job's priority (fair sharing on and its queue preempts its own lower priorities)."""
        if not self.fair:
            return False
        for key, other in self.flavors.items():
            if other is flavor:
                return self._fair_within(project, key.partition("/")[0])
        return False

    def _fair_memo(self, j: int, name: str, t: float) -> tuple[str, str, float, float]:
        job = self.jobs[j]
        within = self._fair_within(job.project, name.partition("/")[0])
        return (name, job.project, job.gpus, self._priority(j, t) if within else 0.0)

    def _fair_held(self, j: int, name: str, t: float) -> bool:
        """Whether a look for targets for ``j`` found none, nothing having changed since."""
        failed = self.fair_failed.get(self._fair_memo(j, name, t))
        if failed is None:
            return False
        return failed[0] == self.fair_version.get(name.partition("/")[0], 0) and t < failed[1]

    def _fair_dead(self, j: int, flavor: _Flavor, t: float, lending: str | None) -> bool:
        """``_Settle._dead`` with fair sharing: trying ``j`` would only set it aside again."""
        if lending is None and flavor.free + EPS >= self.jobs[j].gpus:
            return False
        if self.reason[j] != (LENDING if lending == LENDING else RESOURCES):
            return False
        return self._fair_held(j, self.jobs[j].flavor, t)

    def _try_fair(self, j: int, flavor: _Flavor, name: str, t: float) -> bool:
        """Preempt the targets fair sharing finds for ``j`` (then it starts); False: none."""
        if self._fair_held(j, name, t) or self.fair_evicted.get(j) == t:
            # Evicted this instant: on Kueue its eviction (the Job suspended, the quota given
            # back) ends before it is a head again, a cycle later at least.
            return False
        memo = self._fair_memo(j, name, t)
        version = self.fair_version.get(name.partition("/")[0], 0)
        targets, retry = self._fair_targets(j, flavor, name, t)
        if targets is None:
            self.fair_failed[memo] = (version, retry)
            return False
        self.fair_failed.pop(memo, None)
        project = self.jobs[j].project
        for v in targets:
            self.fair_evicted[v] = t
            self._preempt(v, j, t, "tier" if self.jobs[v].project == project else "reclaim")
        return True

    def _fair_candidates(
        self, j: int, flavor: _Flavor, attempt: _Attempt, t: float
    ) -> tuple[list[int], float]:
        """``findCandidates``, sorted by ``CandidatesOrdering``; and until when the protected
        ones of its own queue stay protected."""
        job = self.jobs[j]
        pool = attempt.pool
        within = self._fair_within(job.project, pool)
        reclaim = self._fair_reclaims(job.project, pool)
        quota = flavor.quotas.get(job.project)
        # ``fitsResourceQuota``: a request above the nominal quota looks for targets only
        # when its queue may preempt while borrowing (fair sharing, reclaim not Never).
        if not reclaim and job.gpus > (quota.guarantee if quota is not None else 0.0) + EPS:
            return [], math.inf
        if not within and not (reclaim and flavor.borrowed > EPS):
            return [], math.inf
        mine = self._priority(j, t)
        # ``cqIsBorrowing``: above its nominal quota on this flavor.
        borrowing = {
            project
            for project, used in flavor.usage.items()
            if project != job.project and used > self._quota(flavor, project).guarantee + EPS
        }
        candidates: list[int] = []
        retry = math.inf
        for v in flavor.running:
            other = self.jobs[v].project
            if other == job.project:
                if not within or self._priority(v, self.run_start[v]) >= mine:
                    continue
                ok, again = self._preemptible(v, t)
                if not ok:
                    retry = min(retry, again)
                    continue
            elif not (reclaim and other in borrowing) or self.cls[v].kind == FORBIDDEN:
                continue
            candidates.append(v)
        candidates.sort(key=lambda v: self._fair_order(v, job.project))
        return candidates, retry

    def _fair_order(self, v: int, project: str) -> tuple[bool, float, float, int]:
        """``CandidatesOrdering``: other queues' first, lower priority, newest admission."""
        return (
            self.jobs[v].project == project,
            self._priority(v, self.run_start[v]),
            -self.run_start[v],
            v,
        )

    def _fair_targets(
        self, j: int, flavor: _Flavor, name: str, t: float
    ) -> tuple[list[int] | None, float]:
        """``fairPreemptions``: the targets that let ``j`` fit, or None; and until when a
        look that found none holds."""
        attempt = _Attempt(self, j, flavor, name)
        candidates, retry = self._fair_candidates(j, flavor, attempt, t)
        if not candidates:
            return None, retry
        project = attempt.project
        attempt.use[project] = attempt.use.get(project, 0.0) + attempt.gpus
        strategies = [STRATEGIES[s] for s in self.kueue.strategies] or [
            _less_or_equal_final,
            _less_initial,
        ]
        fits, refused = self._fair_first(attempt, candidates, strategies[0])
        if not fits and len(strategies) > 1:
            fits = self._fair_second(attempt, refused)
        attempt.use[project] -= attempt.gpus
        if not fits:
            return None, retry
        # ``fillBackWorkloads``: the last but one first, put back while it still fits.
        targets = attempt.targets
        for i in range(len(targets) - 2, -1, -1):
            v = targets[i]
            job = self.jobs[v]
            attempt.use[job.project] += job.gpus
            if attempt.gpus <= attempt.available() + EPS:
                targets[i] = targets[-1]
                targets.pop()
            else:
                attempt.use[job.project] -= job.gpus
        return targets, retry

    def _fair_lists(self, candidates: list[int]) -> dict[str, deque[int]]:
        lists: dict[str, deque[int]] = {}
        for v in candidates:
            lists.setdefault(self.jobs[v].project, deque()).append(v)
        return lists

    def _fair_first(
        self,
        attempt: _Attempt,
        candidates: list[int],
        strategy: Callable[[_Share, _Share, _Share], bool],
    ) -> tuple[bool, list[int]]:
        """``runFirstFsStrategy``: whether it fits, and the candidates the strategy refused."""
        project = attempt.project
        lists = self._fair_lists(candidates)
        pruned: set[str] = set()
        refused: list[int] = []
        quota = attempt.flavor.quotas.get(project)
        within_nominal = (
            attempt.use.get(project, 0.0) <= (quota.guarantee if quota is not None else 0.0) + EPS
        )

        def order(v: int) -> tuple[bool, float, float, int]:
            return self._fair_order(v, project)

        while True:
            target = attempt.next_queue(lists, pruned, order)
            if target is None:
                return False, refused
            queue = lists[target]
            if target == project or within_nominal:
                attempt.remove(queue.popleft())
                if attempt.fits():
                    return True, refused
                continue
            preemptor, old = attempt.share(project), attempt.share(target)
            while queue:
                v = queue.popleft()
                gpus = self.jobs[v].gpus
                attempt.use[target] -= gpus
                new = attempt.share(target)
                attempt.use[target] += gpus
                if strategy(preemptor, old, new):
                    attempt.remove(v)
                    if attempt.fits():
                        return True, refused
                    break
                refused.append(v)

    def _fair_second(self, attempt: _Attempt, refused: list[int]) -> bool:
        """``runSecondFsStrategy``: per queue at most one refused candidate, taken when the
        preemptor's share is below the queue's."""
        project = attempt.project
        lists = self._fair_lists(refused)
        pruned: set[str] = set()

        def order(v: int) -> tuple[bool, float, float, int]:
            return self._fair_order(v, project)

        while True:
            target = attempt.next_queue(lists, pruned, order)
            if target is None:
                return False
            if _less_initial(attempt.share(project), attempt.share(target), _NOT_BORROWING):
                attempt.remove(lists[target].popleft())
                if attempt.fits():
                    return True
            pruned.add(target)
