"""A deterministic discrete-event replay of GPU pools under Arbiter's rules (no Django).

What it models, and whose semantics each rule follows:

- **Pools and flavors.** Each flavor (``pool/flavor``) is a bucket of GPUs; a job asks for
  GPUs of one flavor (fractions allowed) and holds them for the duration it actually ran.
  No nodes: **node placement and fragmentation are not modelled**, nor **gang scheduling**
  across nodes (a job fits when the flavor has enough free GPUs).
- **Order** (Kueue's admission order): work within its project's guarantee first, then by
  effective score (the tier's score plus aging), then fair share, then arrival. The tier
  score dominates as a Slurm multifactor priority does with ``PriorityWeightQOS`` far above
  the other weights. A project is one queue ordered by tier (a Kueue ClusterQueue): its
  lower tier's work counts as within the guarantee only while none of the project's
  higher-tier work waits for the flavor, so it never passes its own project's higher tiers.
- **Aging** (Slurm ``PriorityWeightAge`` with ``PriorityMaxAge`` as the cap): every
  ``aging_after`` seconds of waiting add ``aging_step`` points, never above the cap's score.
  Aging only orders; preemption rights stay those of the job's own tier.
- **Fair share** (Kueue fair sharing): among equal scores the project borrowing the least per
  unit of weight goes first. Slurm's decayed historical usage is not modelled.
- **Strict order, no backfill** (Slurm's main scheduler without ``sched/backfill``): when the
  first job in order does not fit the free GPUs, no later borrowing job of that flavor
  starts (it waits on ``Priority``). Jobs held by a limit are skipped, as Slurm skips them.
  Only the first ``QUEUE_DEPTH`` jobs of one project and tier are looked at per pass
  (Slurm's ``default_queue_depth``). **Backfill is not modelled.**
- **Caps** (Slurm QOS and association limits): a tier's per-job cap (a job above it never
  starts: ``QOSMaxGRESPerJob``), the tier's total (``QOSGrpGRES``), per user
  (``QOSMaxGRESPerUser``) and the project's maximum = guarantee + borrow limit
  (``AssocGrpGRES``; Kueue ``borrowingLimit``).
- **Guarantees, borrowing and lending** (Kueue ``nominalQuota``, ``borrowingLimit``,
  ``lendingLimit`` in a cohort): a project borrows only what others lend (their idle
  guarantee up to their lending limit) plus the pool's unguaranteed GPUs. GPUs held idle by
  lending limits are a quota wait (``AccountingPolicy``). Never-preempt (forbidden) work
  never borrows: borrowed GPUs must be returnable.
- **Reclaim with grace** (Kueue ``reclaimWithinCohort``, Slurm ``GraceTime``): a job within
  its project's guarantee that does not fit because others borrow waits ``reclaim_grace``,
  then borrowers (projects over their guarantee) are preempted, youngest first, and the job
  starts in the same instant.
- **Preemption classes** (Slurm ``Preempt=``/``PreemptExemptTime``; Kueue
  ``withinClusterQueue``/``reclaimWithinCohort``): a tier that may preempt takes GPUs from
  running jobs of the tiers it lists, lowest score and youngest first; forbidden jobs are
  never preempted; cautious ones not before their minimum runtime; no job beyond its
  class's daily maximum. A preempted job is requeued (it keeps its tier and its place by
  arrival), loses the work since its last checkpoint (all of it without checkpoints) and
  pays the requeue cost; both count as GPU time lost.
- **Grants and rule changes**: the rules are a timeline (``[(from, Rules), ...]``); at each
  switch waiting jobs are re-evaluated (tier, caps, class); running jobs keep running, as
  Slurm and Kueue leave admitted work alone when limits drop.

Every wait is recorded with a Slurm reason token whose category is the evidence's
(``REASON_CATEGORY``; ``queues.schedulers.classify`` maps the same tokens).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .rules import CAUTIOUS, FORBIDDEN, ClassRule, Job, QuotaRule, Rules, TierRule

if TYPE_CHECKING:
    from .scheduler_model import SchedulerModel

EPS = 1e-9
DAY = 86400.0
QUEUE_DEPTH = 100

RESOURCES = "Resources"
PRIORITY = "Priority"
PROJECT_MAX = "AssocGrpGRES"
TIER_CAP = "QOSGrpGRES"
USER_CAP = "QOSMaxGRESPerUser"
JOB_CAP = "QOSMaxGRESPerJob"
LENDING = "AccountingPolicy"

# The evidence's wait categories (``queues.models.WaitCategory`` values).
REASON_CATEGORY = {
    RESOURCES: "resource",
    PRIORITY: "queue_rule",
    PROJECT_MAX: "quota",
    TIER_CAP: "quota",
    USER_CAP: "quota",
    JOB_CAP: "quota",
    LENDING: "quota",
}

_Key = tuple[int, int, float, float, int]
_END = 0
_WAKE = 1
_CANCEL = 2


@dataclass
class Result:
    """Per job (in input order): first start, end, preemptions, GPU-seconds lost; the reason
    each job waited from each moment on; every run; and the pool's integrals."""

    jobs: Sequence[Job]
    start: list[float]
    end: list[float]
    preemptions: list[int]
    lost_gpu_seconds: list[float]
    tiers: list[str]  # the tier each job ran (or waited) at, after grants and clipping
    reasons: list[tuple[int, float, str]]  # (job, since, reason token), in time order
    runs: list[tuple[int, float, float]]  # (job, start, end) per run; end is the horizon if running
    used_gpu_seconds: dict[tuple[str, str], float]  # (project, flavor)
    borrowed_gpu_seconds: dict[tuple[str, str], float]
    idle_gpu_seconds: dict[str, float]  # flavor
    begin: float
    horizon: float
    # (victim, preemptor, time, "tier" or "reclaim")
    preempted_by: list[tuple[int, int, float, str]] = field(default_factory=list)
    cancelled: dict[int, float] = field(default_factory=dict)  # job -> when, never started
    classes: list[str] = field(default_factory=list)  # each job's preemption class, at the end

    def reasons_of(self, job: int) -> list[tuple[float, str]]:
        return [(since, token) for j, since, token in self.reasons if j == job]


class _Flavor:
    __slots__ = (
        "blocker",
        "borrowed",
        "by_project",
        "capacity",
        "entries",
        "expiry",
        "free",
        "groups",
        "held",
        "idle",
        "last",
        "lendable",
        "next_expiry",
        "quotas",
        "running",
        "stale",
        "stamps",
        "tier_running",
        "unguaranteed",
        "unswept",
        "usage",
        "within",
    )

    def __init__(self, capacity: float) -> None:
        self.capacity = capacity
        self.free = capacity
        self.groups: dict[tuple[str, str], deque[int]] = {}
        self.running: set[int] = set()
        self.tier_running: dict[str, float] = {}
        self.usage: dict[str, float] = {}
        self.quotas: dict[str, QuotaRule] = {}
        self.borrowed = 0.0
        self.lendable = 0.0
        self.unguaranteed = capacity
        self.last = 0.0
        self.idle = 0.0
        # The scheduling cache: per queue (tier, project) its first job no cap holds back.
        self.entries: dict[tuple[str, str], tuple[_Key, tuple[str, str], int]] = {}
        self.stale: set[tuple[str, str]] = set()
        self.unswept: set[tuple[str, str]] = set()
        self.within: set[tuple[str, str]] = set()
        self.held: set[tuple[str, str]] = set()
        self.stamps: dict[tuple[str, str], tuple[float, int, int]] = {}
        self.expiry: dict[tuple[str, str], float] = {}
        self.next_expiry = math.inf
        self.by_project: dict[str, set[tuple[str, str]]] = {}
        self.blocker: tuple[str, str] | None = None


def _lend(quota: QuotaRule, used: float) -> float:
    idle = quota.guarantee - used
    if idle <= 0:
        return 0.0
    limit = quota.guarantee if quota.lending_limit is None else quota.lending_limit
    return idle if idle < limit else limit


class Replay:
    """One replay. ``Replay(jobs, timeline).run(until=...)`` returns a :class:`Result`."""

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
        self.no_victims: dict[int, tuple[float, float]] = {}
        self.flavors: dict[str, _Flavor] = {}
        self.rules = timeline[0][1]
        self.now = 0.0

    # --- rules -------------------------------------------------------------------------------

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

    def _quota(self, flavor: _Flavor, project: str) -> QuotaRule:
        quota = flavor.quotas.get(project)
        if quota is None:  # no quota: guaranteed nothing (one rule per project, made once)
            quota = self.no_quota.get(project)
            if quota is None:
                quota = self.no_quota[project] = QuotaRule(
                    project=project, flavor="", guarantee=0.0
                )
        return quota

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

    # --- bookkeeping -------------------------------------------------------------------------

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

    # --- queue -------------------------------------------------------------------------------

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
        quota = self._quota(flavor, job.project)
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
        jobs = self.jobs
        tier = self.tier[group[0]]
        slug = tier.slug
        quota = self._quota(flavor, key[1])
        used = flavor.usage.get(key[1], 0.0)
        tier_left = left = math.inf
        if tier.max_gpus_total is not None:
            tier_left = left = tier.max_gpus_total - self.tier_use.get(slug, 0.0)
        maximum = quota.maximum
        if maximum is not None and maximum - used < left:
            left = maximum - used
        version = self.user_version.get(slug, 0)
        stamp = flavor.stamps.get(key)
        if stamp is not None and stamp[0] >= left - EPS and stamp[1:] == (len(group), version):
            return  # nothing that held it back has eased
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
                steps = int((t - jobs[j].arrival) / tier.aging_after) + 1
                until = jobs[j].arrival + steps * tier.aging_after
                flavor.expiry[key] = until
                if until < flavor.next_expiry:
                    flavor.next_expiry = until
                self._wake(name, until)
            return
        flavor.stamps[key] = (left, len(group), version)

    # --- starting, ending, preempting --------------------------------------------------------

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
        self.reason[v] = None
        self._enqueue(v, t, fresh=False)

    def _victims(
        self, j: int, flavor: _Flavor, candidates: list[int], t: float
    ) -> tuple[list[int] | None, float]:
        """Enough preemptible jobs among ``candidates`` (in preference order) to fit ``j``."""
        need = self.jobs[j].gpus - flavor.free
        chosen: list[int] = []
        retry = math.inf
        for v in candidates:
            ok, again = self._preemptible(v, t)
            if not ok:
                retry = min(retry, again)
                continue
            chosen.append(v)
            need -= self.jobs[v].gpus
            if need <= EPS:
                return chosen, retry
        return None, retry

    def _try_preempt(self, j: int, flavor: _Flavor, name: str, t: float) -> bool:
        tier = self.tier[j]
        if not tier.may_preempt or not tier.preemptible:
            return False
        gpus = self.jobs[j].gpus
        lower = sum(flavor.tier_running.get(slug, 0.0) for slug in tier.preemptible)
        if lower + flavor.free + EPS < gpus:
            return False
        held = self.no_victims.get(j)
        if held is not None and t < held[0] and flavor.free <= held[1] + EPS:
            return False  # its possible victims are all protected until then
        candidates = [v for v in flavor.running if self.tier[v].slug in tier.preemptible]
        candidates.sort(key=lambda v: (self.tier[v].score, -self.run_start[v], -v))
        victims, retry = self._victims(j, flavor, candidates, t)
        if victims is None:
            self.no_victims[j] = (retry, flavor.free)
            if retry < math.inf:
                self._wake(name, retry)
            return False
        self.no_victims.pop(j, None)
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
        held = self.no_victims.get(j)
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
            self.no_victims[j] = (retry, flavor.free)
            if retry < math.inf:
                self._wake(name, retry)
            return False
        self.no_victims.pop(j, None)
        for v in victims:
            self._preempt(v, j, t, "reclaim")
        return True

    # --- the scheduling pass -----------------------------------------------------------------

    def _pass(self, name: str, t: float) -> None:
        flavor = self.flavors[name]
        if t >= flavor.next_expiry:  # aging raised some queues' first jobs
            soonest = math.inf
            for key, until in list(flavor.expiry.items()):
                if until <= t:
                    flavor.stale.add(key)
                    del flavor.expiry[key]
                elif until < soonest:
                    soonest = until
            flavor.next_expiry = soonest
        if flavor.held:  # held by lending limits: lending changes with every start and end
            flavor.stale |= flavor.held
            flavor.held = set()
        entries = flavor.entries
        blocker = None
        while True:
            if flavor.stale:
                # In a fixed order, not the set's: the order decides which wakes are pushed,
                # and a set of strings iterates in an order that changes with the process's
                # hash seed (the same replay in two processes would differ).
                stale = sorted(flavor.stale)
                flavor.stale = set()
                for key in stale:
                    self._candidate(name, flavor, key, t)
            if not entries:
                break
            entry, key, pos = min(entries.values())
            j = flavor.groups[key][pos]
            gpus = self.jobs[j].gpus
            lending = self._lending(j, flavor)
            if lending == LENDING:
                self._say(j, LENDING, t)
                del entries[key]
                flavor.unswept.discard(key)
                flavor.within.discard(key)
                flavor.held.add(key)
                continue
            how = ""
            if lending is None and flavor.free + EPS >= gpus:
                how = "free"
            elif lending is None and self._try_preempt(j, flavor, name, t):
                how = "tier"
            elif entry[0] == 0 and self._try_reclaim(j, flavor, name, t):
                how = "reclaim"
            if not how:
                self._say(j, RESOURCES, t)
                blocker = key
                break
            self._begin(j, flavor, name, t)
        if flavor.blocker is not None and flavor.blocker != blocker and flavor.blocker in entries:
            flavor.unswept.add(flavor.blocker)
        flavor.blocker = blocker
        if blocker is None:
            return
        # Strict order behind the blocker: the rest wait on Priority, except work within its
        # guarantee, which may still take lent GPUs back.
        flavor.unswept.discard(blocker)
        groups = flavor.groups
        for key in sorted(flavor.unswept):
            if key not in flavor.within:
                self._say(groups[key][entries[key][2]], PRIORITY, t)
        flavor.unswept = set()
        for key in sorted(flavor.within):
            if key == blocker or key not in entries:
                continue
            entry, _, pos = entries[key]
            j = groups[key][pos]
            if self._try_reclaim(j, flavor, name, t):
                self._begin(j, flavor, name, t)
                self.dirty.add(name)
                return
            self._say(j, RESOURCES if flavor.free + EPS < self.jobs[j].gpus else PRIORITY, t)

    # --- the loop ----------------------------------------------------------------------------

    def run(self, until: float | None = None) -> Result:
        jobs = self.jobs
        order = sorted(range(self.n), key=lambda j: (jobs[j].arrival, j))
        begin = min([self.timeline[0][0]] + ([jobs[order[0]].arrival] if order else []))
        self.dirty: set[str] = set()
        self.wake_flavor: dict[int, str] = {}
        self.now = begin
        self._apply(self.timeline[0][1], begin)
        switches = [at for at, _ in self.timeline]
        si = 1
        ai = 0
        heap = self.heap
        while True:
            t = math.inf
            if ai < self.n:
                t = jobs[order[ai]].arrival
            if heap and heap[0][0] < t:
                t = heap[0][0]
            if si < len(switches) and switches[si] < t:
                t = switches[si]
            if t == math.inf or (until is not None and t > until):
                break
            self.now = t
            while heap and heap[0][0] <= t:
                _, seq, kind, j, token = heapq.heappop(heap)
                if kind == _END:
                    if token == self.token[j]:
                        self._stop(j, t)
                        self.end[j] = t
                        self.remaining[j] = 0.0
                elif kind == _CANCEL:
                    self._cancel(j, t)
                else:
                    self.dirty.add(self.wake_flavor.pop(seq))
            while si < len(switches) and switches[si] <= t:
                self._apply(self.timeline[si][1], t)
                si += 1
            while ai < self.n and jobs[order[ai]].arrival <= t:
                j = order[ai]
                self._enqueue(j, t, fresh=True)
                patience = jobs[j].patience
                if patience is not None:
                    self._push(jobs[j].arrival + patience, _CANCEL, j, 0)
                ai += 1
            while self.dirty:
                name = min(self.dirty)
                self.dirty.discard(name)
                self._pass(name, t)
            for j in self.behind:
                if self.reason[j] is None and j not in self.flavors[jobs[j].flavor].running:
                    self._say(j, PRIORITY, t)
            self.behind = []
        horizon = self.now if until is None else until
        return self._result(begin, horizon)

    def _result(self, begin: float, horizon: float) -> Result:
        runs = list(self.runs)
        for flavor_name, flavor in self.flavors.items():
            self._tick_flavor(flavor, horizon)
            for project in flavor.usage:
                self._tick_project(project, flavor_name, flavor, horizon)
            for j in sorted(flavor.running):
                runs.append((j, self.run_start[j], horizon))
        return Result(
            jobs=self.jobs,
            start=self.start,
            end=self.end,
            preemptions=self.preemptions,
            lost_gpu_seconds=self.lost,
            tiers=[tier.slug if tier is not None else "" for tier in self.tier],
            reasons=self.reasons,
            runs=runs,
            used_gpu_seconds=dict(self.used),
            borrowed_gpu_seconds=dict(self.borrowed_seconds),
            idle_gpu_seconds={name: flavor.idle for name, flavor in self.flavors.items()},
            begin=begin,
            horizon=horizon,
            preempted_by=self.preempted_by,
            cancelled=self.cancelled,
            classes=[cls.slug if cls is not None else "" for cls in self.cls],
        )


def replay(
    jobs: Sequence[Job],
    timeline: Sequence[tuple[float, Rules]],
    until: float | None = None,
    model: SchedulerModel | None = None,
) -> Result:
    """Replay ``jobs`` under the rules of ``timeline`` (``[(from, Rules), ...]``); ``model``
    (``queues.replay.scheduler_model.SchedulerModel``) picks the cluster's scheduler's model."""
    if model is not None:
        return model.replay(jobs, timeline, until)
    return Replay(jobs, timeline).run(until=until)
