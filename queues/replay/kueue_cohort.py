"""The cohort as the Kueue model's fair sharing reads it (no Django).

``KueueSettings``; each ClusterQueue's policies as Arbiter's export writes them
(``reclaimWithinCohort``, ``withinClusterQueue``, ``borrowingLimit``; the cohort's lendable GPUs
and fair-share weights), kept until the rules change; and each flavor's running jobs per
ClusterQueue, filed in ``CandidatesOrdering`` as they start and stop, from which ``kueue_fair``
takes a look's candidates without sorting them.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .engine import Replay
from .engine.vocabulary import _Flavor
from .kueue_look import _local
from .rules import FORBIDDEN, Job, QuotaRule, Rules

LESS_OR_EQUAL_FINAL = "LessThanOrEqualToFinalShare"
LESS_INITIAL = "LessThanInitialShare"
ANY = "Any"
NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"


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


class _Cohort(Replay):
    """What fair sharing reads of the pool: its ClusterQueues' policies and running jobs."""

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
        # Per pool a count of every change of usage, and per (pool, project) of the
        # project's: a look kept holds until what it read changes.
        self.fair_version: dict[str, int] = {}
        self.fair_used: dict[tuple[str, str], int] = {}
        self.fair_pool: dict[str, tuple[float, dict[str, float]]] = {}
        # Per flavor, per project its running jobs (``findCandidates`` looks at a few queues),
        # and a running job's priority at its start (its order as a candidate) until the
        # rules change.
        self.fair_running: dict[str, dict[str, set[int]]] = {}
        self.fair_rank: dict[int, tuple[float, float]] = {}
        # Per flavor, per project its running jobs by ``_fair_rank`` (a look's candidates in
        # ``CandidatesOrdering`` without sorting them), and each one's rank as filed.
        self.fair_order: dict[str, dict[str, list[tuple[float, float, int]]]] = {}
        self.fair_ranked: dict[int, tuple[float, float, int]] = {}
        # Per (project, pool, within?) its ClusterQueue's policy, until the rules change.
        self.fair_policy: dict[tuple[str, str, bool], bool] = {}
        self.fair_static: dict[
            str, tuple[list[_Flavor], dict[str, float], float, dict[str, tuple[float, float]]]
        ] = {}

    def _priority(self, j: int, t: float) -> float:  # ``KueueReplay``'s
        raise NotImplementedError

    def _apply(self, rules: Rules, t: float) -> None:
        self._fair_forget()
        super()._apply(rules, t)
        self._fair_forget()
        # A running job's priority at its start is read under the new rules.
        self.fair_order, self.fair_ranked = {}, {}
        for name, per_project in self.fair_running.items():
            for project, running in per_project.items():
                ranks = sorted(self._fair_rank(v) for v in running)
                self.fair_order.setdefault(name, {})[project] = ranks
                self.fair_ranked.update((rank[2], rank) for rank in ranks)

    def _fair_forget(self) -> None:
        """What is kept until the rules change."""
        self.fair_pool, self.fair_rank = {}, {}
        self.fair_policy, self.fair_static = {}, {}

    def _begin(self, j: int, flavor: _Flavor, name: str, t: float) -> None:
        super()._begin(j, flavor, name, t)
        project = self.jobs[j].project
        self.fair_running.setdefault(name, {}).setdefault(project, set()).add(j)
        rank = self.fair_ranked[j] = self._fair_rank(j)
        bisect.insort(self.fair_order.setdefault(name, {}).setdefault(project, []), rank)

    def _stop(self, j: int, t: float) -> None:
        super()._stop(j, t)
        job = self.jobs[j]
        running = self.fair_running.get(job.flavor, {}).get(job.project)
        if running is not None:
            running.discard(j)
        rank = self.fair_ranked.pop(j, None)
        if rank is not None:
            ranks = self.fair_order[job.flavor][job.project]
            del ranks[bisect.bisect_left(ranks, rank)]

    def _use(self, flavor: _Flavor, name: str, project: str, delta: float, t: float) -> None:
        super()._use(flavor, name, project, delta, t)
        pool = name.partition("/")[0]
        self.fair_version[pool] = self.fair_version.get(pool, 0) + 1
        self.fair_used[pool, project] = self.fair_used.get((pool, project), 0) + 1

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
        memo = self.fair_policy.get((project, pool, False))
        if memo is None:
            memo = self.fair_policy[(project, pool, False)] = self._fair_reclaims_now(project, pool)
        return memo

    def _fair_within(self, project: str, pool: str) -> bool:
        memo = self.fair_policy.get((project, pool, True))
        if memo is None:
            memo = self.fair_policy[(project, pool, True)] = self._fair_within_now(project, pool)
        return memo

    def _fair_reclaims_now(self, project: str, pool: str) -> bool:
        named = self.kueue.reclaim
        if named is not None and project in named:
            return named[project] != NEVER
        return any(quota.guarantee > 0 for quota in self._pool_quotas(pool, project))

    def _fair_within_now(self, project: str, pool: str) -> bool:
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

    def _fair_static(
        self, flavor: _Flavor, name: str
    ) -> tuple[list[_Flavor], dict[str, float], float, dict[str, tuple[float, float]]]:
        """What a look on the flavor reads of the rules (``_Attempt``), until they change."""
        static = self.fair_static.get(name)
        if static is None:
            pool = name.partition("/")[0]
            others = [
                other
                for key, other in self.flavors.items()
                if other is not flavor and key.partition("/")[0] == pool
            ]
            subtree = flavor.unguaranteed
            for rule in flavor.quotas.values():
                subtree += rule.guarantee - _local(rule)
            local_of = {project: _local(rule) for project, rule in flavor.quotas.items()}
            static = self.fair_static[name] = (others, local_of, subtree, {})
        return static

    def _fair_lendable(self, pool: str) -> float:
        return self._fair_cohort(pool)[0]

    def _fair_weight(self, project: str, pool: str) -> float:
        return self._fair_cohort(pool)[1].get(project, 1.0)

    def _fair_rank(self, v: int) -> tuple[float, float, int]:
        """A running job's order within its queue's candidates: lower priority (at its start),
        then newest admission."""
        start = self.run_start[v]
        rank = self.fair_rank.get(v)
        if rank is None or rank[1] != start:
            rank = self.fair_rank[v] = (self._priority(v, start), start)
        return (rank[0], -start, v)

    def _fair_order(self, v: int, project: str) -> tuple[bool, float, float, int]:
        """``CandidatesOrdering``: other queues' first, lower priority, newest admission."""
        return (self.jobs[v].project == project, *self._fair_rank(v))
