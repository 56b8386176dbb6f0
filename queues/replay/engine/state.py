"""The replay's state and its bookkeeping: the rules in force per job, the queue, the
events, the GPUs each project and tier uses."""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections import deque
from collections.abc import Sequence

from ..rules import FORBIDDEN, ClassRule, Job, QuotaRule, Rules, TierRule
from .vocabulary import (
    _WAKE,
    EPS,
    JOB_CAP,
    LENDING,
    RESOURCES,
    _Flavor,
    _lend,
)


class _State:
    """``Replay``'s state and its bookkeeping: the rules in force per job, the queue, the
    events, the GPUs each project and tier uses."""

    # Set by ``_apply`` (the rules in force from a switch on) and ``run`` (each pass's work).
    tiers: dict[str, TierRule]
    classes: dict[str, ClassRule]
    default_class: ClassRule
    default_tier: TierRule
    dirty: set[str]
    wake_flavor: dict[int, str]

    def __init__(self, jobs: Sequence[Job], timeline: Sequence[tuple[float, Rules]]) -> None:
        if not timeline:
            raise ValueError("a replay needs rules")
        times = [at for at, _ in timeline]
        if times != sorted(times):
            raise ValueError("the rules' timeline must be in time order")
        for _, rules in timeline:
            rules.check()
        flavors = set(timeline[0][1].capacity)
        for _, rules in timeline:
            if set(rules.capacity) != flavors:
                raise ValueError("every period of the timeline must name the same flavors")
        for job in jobs:
            if job.flavor not in flavors:
                raise ValueError(f"job {job.name!r} asks for unknown flavor {job.flavor!r}")
            if not (job.gpus > 0 and job.duration >= 0 and math.isfinite(job.arrival)):
                raise ValueError(f"job {job.name!r} needs GPUs > 0, a duration >= 0, an arrival")
        self.jobs = jobs
        self.timeline = list(timeline)
        n = len(jobs)
        self.n = n
        self.remaining = [job.duration for job in jobs]
        self.start = [math.nan] * n
        self.end = [math.nan] * n
        self.preemptions = [0] * n
        self.lost = [0.0] * n
        self.run_start = [0.0] * n
        self.token = [0] * n
        self.reason: list[str | None] = [None] * n
        self.tier: list[TierRule] = [None] * n  # type: ignore[list-item]
        self.cls: list[ClassRule] = [None] * n  # type: ignore[list-item]
        self.day_count: dict[int, tuple[int, int]] = {}
        self.ask: dict[int, float] = {}
        self.reasons: list[tuple[int, float, str]] = []
        self.behind: list[int] = []
        self.runs: list[tuple[int, float, float]] = []
        self.preempted_by: list[tuple[int, int, float, str]] = []
        # When each job was last preempted: not a victim again in that instant (``_victims``).
        self.victim_at: dict[int, float] = {}
        self.cancelled: dict[int, float] = {}
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.capped: set[int] = set()
        self.tier_use: dict[str, float] = {}
        self.user_use: dict[tuple[str, str], float] = {}
        self.used: dict[tuple[str, str], float] = {}
        self.borrowed_seconds: dict[tuple[str, str], float] = {}
        self.project_last: dict[tuple[str, str], float] = {}
        self.wakes: dict[str, float] = {}
        self.by_tier: dict[str, set[tuple[str, tuple[str, str]]]] = {}
        self.user_version: dict[str, int] = {}
        self.no_quota: dict[str, QuotaRule] = {}  # the rule of a project without a quota
        # (job, "tier" or "reclaim") -> (until when its possible victims are protected, the
        # free GPUs then): its look for victims is not repeated before either changes.
        self.no_victims: dict[tuple[int, str], tuple[float, float]] = {}
        self.flavors: dict[str, _Flavor] = {}
        self.rules = timeline[0][1]
        self.now = 0.0

    def _quota(self, flavor: _Flavor, project: str) -> QuotaRule:
        quota = flavor.quotas.get(project)
        if quota is None:  # no quota: guaranteed nothing (one rule per project, made once)
            quota = self.no_quota.get(project)
            if quota is None:
                quota = self.no_quota[project] = QuotaRule(
                    project=project, flavor="", guarantee=0.0
                )
        return quota

    def _left(self, flavor: _Flavor, project: str, tier: TierRule) -> tuple[float, float]:
        """The GPUs the caps leave a queue (``tier`` of ``project`` on ``flavor``): the
        tier's total cap's, and the lesser of that and the project's maximum's."""
        tier_left = left = math.inf
        if tier.max_gpus_total is not None:
            tier_left = left = tier.max_gpus_total - self.tier_use.get(tier.slug, 0.0)
        # ``_quota(...).maximum`` inline (a hot path): no quota, no maximum.
        quota = flavor.quotas.get(project)
        if quota is not None and quota.borrow_limit is not None:
            maximum = quota.guarantee + quota.borrow_limit
            left = min(left, maximum - flavor.usage.get(project, 0.0))
        return tier_left, left

    def _resolve(self, j: int) -> None:
        job = self.jobs[j]
        rules = self.rules
        top = self.tiers.get(rules.project_tiers.get(job.project, ""), self.default_tier)
        tier = self.tiers.get(job.tier, top) if job.tier else top
        if tier.score > top.score:
            tier = top  # a project may use its own tier and those below it
        raised = rules.job_tiers.get(job.name)
        if raised is not None and self.tiers[raised].score > tier.score:
            tier = self.tiers[raised]
        self.tier[j] = tier
        quota = self.flavors[job.flavor].quotas.get(job.project)
        cls = (
            self.classes.get(quota.preemption_class, self.default_class)
            if quota is not None and quota.preemption_class
            else self.default_class
        )
        protected = rules.job_classes.get(job.name)
        if protected is not None:
            cls = self.classes[protected]
        self.cls[j] = cls

    def _say(self, j: int, token: str, t: float) -> None:
        if self.reason[j] != token:
            self.reason[j] = token
            self.reasons.append((j, t, token))

    def _tick_flavor(self, flavor: _Flavor, t: float) -> None:
        flavor.idle += (t - flavor.last) * flavor.free
        flavor.last = t

    def _tick_project(self, project: str, name: str, flavor: _Flavor, t: float) -> None:
        key = (project, name)
        last = self.project_last.get(key, t)
        used = flavor.usage.get(project, 0.0)
        if used > 0 and t > last:
            self.used[key] = self.used.get(key, 0.0) + (t - last) * used
            over = used - self._quota(flavor, project).guarantee
            if over > 0:
                self.borrowed_seconds[key] = self.borrowed_seconds.get(key, 0.0) + (t - last) * over
        self.project_last[key] = t

    def _use(self, flavor: _Flavor, name: str, project: str, delta: float, t: float) -> None:
        self._tick_flavor(flavor, t)
        self._tick_project(project, name, flavor, t)
        quota = self._quota(flavor, project)
        used = flavor.usage.get(project, 0.0)
        flavor.lendable -= _lend(quota, used)
        flavor.borrowed -= max(0.0, used - quota.guarantee)
        used += delta
        if abs(used) < EPS:
            used = 0.0
        flavor.usage[project] = used
        flavor.lendable += _lend(quota, used)
        flavor.borrowed += max(0.0, used - quota.guarantee)
        flavor.free -= delta
        stale = flavor.by_project.get(project)
        if stale:
            flavor.stale |= stale

    def _push(self, t: float, kind: int, j: int, token: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, j, token))

    def _wake(self, name: str, t: float) -> None:
        pending = self.wakes.get(name)
        if pending is None or t < pending or pending <= self.now:
            self.wakes[name] = t
            self.seq += 1
            heapq.heappush(self.heap, (t, self.seq, _WAKE, -1, 0))
            self.wake_flavor[self.seq] = name

    def _enqueue(self, j: int, t: float, fresh: bool) -> None:
        job = self.jobs[j]
        self._resolve(j)
        tier = self.tier[j]
        if tier.max_gpus_per_job is not None and job.gpus > tier.max_gpus_per_job + EPS:
            self.capped.add(j)
            self._say(j, JOB_CAP, t)
            return
        flavor = self.flavors[job.flavor]
        key = (tier.slug, job.project)
        group = flavor.groups.get(key)
        if group is None:
            group = flavor.groups[key] = deque()
            flavor.by_project.setdefault(job.project, set()).add(key)
            flavor.stale |= flavor.by_project[job.project]  # its lower tiers wait behind it
            if tier.max_gpus_total is not None or tier.max_gpus_per_user is not None:
                self.by_tier.setdefault(tier.slug, set()).add((job.flavor, key))
        if fresh or not group or self.jobs[group[-1]].arrival <= job.arrival:
            group.append(j)
            if key not in flavor.entries:
                flavor.stale.add(key)
        else:  # a requeued job goes back to its place by arrival
            arrivals = [self.jobs[k].arrival for k in group]
            group.insert(bisect_right(arrivals, job.arrival), j)
            flavor.stale.add(key)
        if len(group) > 1:
            self.behind.append(j)  # behind its own queue: said after the passes, if still so
        self.dirty.add(job.flavor)

    def _score(self, j: int, t: float) -> int:
        tier = self.tier[j]
        if tier.aging_after:
            steps = int((t - self.jobs[j].arrival) / tier.aging_after)
            score = tier.score + steps * tier.aging_step
            if tier.aging_cap is not None and score > tier.aging_cap:
                score = max(tier.aging_cap, tier.score)
            return score
        return tier.score

    def _key(self, j: int, flavor: _Flavor, t: float) -> tuple[int, int, float, float, int]:
        job = self.jobs[j]
        quota = flavor.quotas.get(job.project)
        guarantee = quota.guarantee if quota is not None else 0.0
        weight = quota.fair_share_weight if quota is not None else 1.0
        used = flavor.usage.get(job.project, 0.0)
        borrowing = 1 if used + job.gpus > guarantee + EPS else 0
        if not borrowing:
            # One project is one queue ordered by tier (a Kueue ClusterQueue): its work within
            # the guarantee goes first only while none of its higher tiers waits here.
            score = self.tier[j].score
            tiers, groups = self.tiers, flavor.groups
            for key in flavor.by_project[job.project]:
                if tiers[key[0]].score > score and groups.get(key):
                    borrowing = 1
                    break
        over = used - guarantee
        share = over / weight if over > 0 else 0.0
        return (borrowing, -self._score(j, t), share, job.arrival, j)

    def _lending(self, j: int, flavor: _Flavor) -> str | None:
        """Whether others lend enough for ``j`` to borrow: None, or why not (a token)."""
        job = self.jobs[j]
        quota = flavor.quotas.get(job.project) or self._quota(flavor, job.project)
        used = flavor.usage.get(job.project, 0.0)
        after = used + job.gpus
        if after <= quota.guarantee + EPS:
            return None
        if self.cls[j].kind == FORBIDDEN:
            return LENDING  # never-preempt work never borrows
        borrowed = flavor.borrowed - max(0.0, used - quota.guarantee) + after - quota.guarantee
        lendable = flavor.lendable - _lend(quota, used) + _lend(quota, after)
        if borrowed > flavor.unguaranteed + lendable + EPS:
            # Idle GPUs held for their owners are a quota wait; a full pool is a shortage.
            return LENDING if flavor.free + EPS >= job.gpus else RESOURCES
        return None

    def _tier_use(self, j: int, delta: float) -> None:
        job = self.jobs[j]
        tier = self.tier[j]
        slug = tier.slug
        self.tier_use[slug] = self.tier_use.get(slug, 0.0) + delta
        user = (job.user, slug)
        self.user_use[user] = self.user_use.get(user, 0.0) + delta
        flavor = self.flavors[job.flavor]
        flavor.tier_running[slug] = flavor.tier_running.get(slug, 0.0) + delta
        if tier.max_gpus_per_user is not None:
            self.user_version[slug] = self.user_version.get(slug, 0) + 1
        for name, key in self.by_tier.get(slug, ()):
            self.flavors[name].stale.add(key)
            self.dirty.add(name)

    def _cancel(self, j: int, t: float) -> None:
        """The user gives up on a job that has not started yet."""
        if not math.isnan(self.start[j]):
            return
        job = self.jobs[j]
        flavor = self.flavors[job.flavor]
        key = (self.tier[j].slug, job.project)
        group = flavor.groups.get(key)
        if group is not None and j in group:
            group.remove(j)
            flavor.stale.add(key)
            if not group:
                flavor.stale |= flavor.by_project[job.project]
            self.dirty.add(job.flavor)
        self.capped.discard(j)
        self.cancelled[j] = t
        self.reason[j] = None
