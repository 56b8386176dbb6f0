"""Why one pending job waits, as an answer that proves itself.

``diagnose`` is a pure function of a ``QueueState`` (what the job's own source runs and
keeps waiting now, the limits in force) and the job: it names the limit that holds the job
and the figures that make that true, or answers *unknown* with the scheduler's raw reason
when the figures do not support any category. ``queue_state`` reads the state from the
database, from the job's own source only.

The limits, from the scheduler's reason (Slurm reason tokens; Kueue and kube-scheduler
categories as the classifier decided them):

- **project quota** (``AssocGrp*``, ``*PerAccount``, a quota category elsewhere): the
  project's effective maximum of the job's flavor in the job's pool, against the GPUs of that
  flavor its jobs run in that pool. True when used + asked > maximum; a maximum of 0 means
  the job can never start as it is.
- **tier cap** (``QOSGrp*``): the tier's cap across every project (Arbiter compiles a tier's
  ``max_gpus_total`` as the tier QOS's ``GrpTRES``), against the GPUs the tier's jobs run. A
  quota exception for one project does not lift it.
- **tier per-user cap** (``QOSMax*PerUser``): the tier's per-user cap (compiled from
  ``max_gpus_per_job``), against the user's GPUs running in the tier.
- **per-job ceiling** (``*PerJob``, ``*PerNode``, ``QOSMin*``): the job asks for more than one
  job may have: true when asked > the tier's per-job maximum.
- **association limit** (``AssocMaxJobsLimit`` and the other job-count limits): a limit set
  by hand on the account or user (Arbiter compiles none): ops must change it.
- **pool capacity** (a resource category): the declared capacity of the job's flavor in its
  pool (``definitions.job_pool_id``), against the GPUs of that flavor the source runs in that
  pool. True when free < asked.
- **jobs ahead** (``Priority``): pending jobs of the same source, flavor and pool that could
  start (not held, not waiting on a dependency, a begin time or a node) and rank ahead (a
  higher tier, or the same tier submitted earlier), with their true count.
- **hold**, **begin time**, **dependency**, **constraint**, **other queue rule**: the raw
  reason is the evidence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from queues.models import WaitCategory

UNKNOWN = "unknown"
AHEAD_SHOWN = 20


class Limit:
    PROJECT_QUOTA = "project_quota"
    TIER_CAP = "tier_cap"
    USER_CAP = "user_cap"
    PER_JOB = "per_job"
    ASSOCIATION = "association_limit"
    POOL_CAPACITY = "pool_capacity"
    JOBS_AHEAD = "jobs_ahead"
    HOLD = "hold"
    BEGIN_TIME = "begin_time"
    DEPENDENCY = "dependency"
    CONSTRAINT = "constraint"
    QUEUE_RULE = "queue_rule"
    NONE = ""


HELD = frozenset({"JobHeldAdmin", "JobHeldUser", "JobHoldMaxRequeue"})
NEVER = frozenset({"BadConstraints", "DependencyNeverSatisfied"})
ASSOCIATION_COUNTS = frozenset(
    {"AssocMaxJobsLimit", "AssocMaxSubmitJobLimit", "AssociationJobLimit"}
)
TIER_CAP = re.compile(r"^QOSGrp\w+$")
USER_CAP = re.compile(r"^QOSMax\w*PerUser\w*$")
PER_JOB = re.compile(r"^((Assoc|QOS)Max\w*Per(Job|Node)\w*|QOSMin\w+|MaxMemPerLimit)$")
# Reasons of a job that could start as soon as it is its turn (it competes for the GPUs).
CAN_START = frozenset({"Priority", "Resources", "None", ""})


@dataclass(frozen=True)
class Running:
    """GPUs running now, of one (project, tier, user, flavor, pool)."""

    project: int | None
    tier: int | None
    user: str
    flavor: int | None
    pool: int | None
    gpus: float


@dataclass(frozen=True)
class Waiting:
    """Another pending job of the same source."""

    job_id: str
    project: int | None
    tier: int | None
    tier_score: int
    flavor: int | None
    pool: int | None
    gpus: float
    submitted: datetime | None
    reason: str


@dataclass(frozen=True)
class TierRule:
    score: int
    max_total: int | None = None
    max_per_job: int | None = None


@dataclass
class QueueState:
    """What the job's source runs and keeps waiting now, and the limits in force."""

    running: list[Running] = field(default_factory=list)
    waiting: list[Waiting] = field(default_factory=list)
    # (project, pool, flavor) → the effective maximum (None: up to the pool's capacity).
    quotas: dict[tuple[int, int, int], int | None] = field(default_factory=dict)
    tiers: dict[int, TierRule] = field(default_factory=dict)
    # (pool, flavor) → the declared capacity of the job's pool and its cluster's pools.
    capacity: dict[tuple[int, int], int] = field(default_factory=dict)
    # What Slurm holds for the job at this moment (``queues.services.slurm.waits.LiveWait``):
    # when set, every figure of the answer comes from it, not from Arbiter's records.
    live: Any = None
    # The job's GPU type's declared capacity in its pool (to say where it differs).
    declared: int | None = None


@dataclass(frozen=True)
class Asked:
    """The pending job."""

    job_id: str
    project: int | None
    tier: int | None
    user: str
    flavor: int | None
    pool: int | None
    gpus: float
    submitted: datetime | None
    reason: str  # the scheduler's reason token
    category: str  # as the classifier decided it
    constraints: str = ""


@dataclass
class Diagnosis:
    category: str  # a WaitCategory value, or UNKNOWN
    limit: str
    reason: str
    figures: dict[str, float] = field(default_factory=dict)
    holders: dict[int | None, float] = field(default_factory=dict)  # project → GPUs
    ahead: list[Waiting] = field(default_factory=list)  # the first AHEAD_SHOWN
    ahead_count: int = 0
    clears_by_itself: bool | None = None
    can_never_start: bool = False
    why_unknown: str = ""  # a key of WHY_UNKNOWN (queues.selectors.workload)
    # Facts in words from the live cluster: ``setting`` (a limit as Slurm holds it, e.g.
    # ``MaxJobs=0 on root@lab.alpha``), ``submit`` (what to submit instead), ``mismatch``
    # (Slurm's nodes and Arbiter's declared capacity differ), ``share``, ``dependency``.
    details: dict[str, str] = field(default_factory=dict)
    live: bool = False

    @property
    def known(self) -> bool:
        return self.category != UNKNOWN


def _sum(rows: Iterable[Running]) -> float:
    return float(sum(row.gpus for row in rows))


def _by_project(rows: Iterable[Running]) -> dict[int | None, float]:
    holders: dict[int | None, float] = {}
    for row in rows:
        holders[row.project] = holders.get(row.project, 0.0) + row.gpus
    return dict(sorted(holders.items(), key=lambda item: -item[1]))


def _unknown(job: Asked, why: str, **figures: float) -> Diagnosis:
    return Diagnosis(
        category=UNKNOWN, limit=Limit.NONE, reason=job.reason, figures=figures, why_unknown=why
    )


def jobs_ahead(state: QueueState, job: Asked) -> list[Waiting]:
    """The pending jobs that compete with ``job`` for the same flavor and pool, could start,
    and rank ahead of it (in rank order)."""
    mine = state.tiers.get(job.tier) if job.tier is not None else None
    score = mine.score if mine else 0

    def ranks_ahead(other: Waiting) -> bool:
        if other.tier_score != score:
            return other.tier_score > score
        if other.submitted is None or job.submitted is None:
            return False
        return (other.submitted, other.job_id) < (job.submitted, job.job_id)

    def could_start(other: Waiting) -> bool:
        # A job over its tier's per-job cap shows ``Priority`` while others block it, yet
        # can never start: it is ahead of no one.
        rule = state.tiers.get(other.tier) if other.tier is not None else None
        too_big = rule is not None and rule.max_per_job is not None
        return other.reason in CAN_START and not (too_big and other.gpus > rule.max_per_job)  # type: ignore[union-attr,operator]

    competing = [
        other
        for other in state.waiting
        if other.job_id != job.job_id
        and other.flavor == job.flavor
        and other.pool == job.pool
        and could_start(other)
        and ranks_ahead(other)
    ]
    return sorted(
        competing,
        key=lambda o: (
            -o.tier_score,
            o.submitted is None,
            o.submitted.timestamp() if o.submitted else 0.0,
            o.job_id,
        ),
    )


def _quota(state: QueueState, job: Asked) -> Diagnosis:
    # one piece: the quota reasons in the order they are tried (the first that matches
    # decides), each branch a verdict with the figures that prove it or an "unknown".
    reason = job.reason
    tier = state.tiers.get(job.tier) if job.tier is not None else None
    in_tier = [row for row in state.running if row.tier == job.tier]
    if reason in ASSOCIATION_COUNTS:
        return Diagnosis(
            category=WaitCategory.QUOTA,
            limit=Limit.ASSOCIATION,
            reason=reason,
            clears_by_itself=None,
        )
    if PER_JOB.match(reason):
        if tier is None or tier.max_per_job is None or job.gpus <= tier.max_per_job:
            return _unknown(
                job,
                "per_job_room",
                asked=job.gpus,
                **({"limit": tier.max_per_job} if tier and tier.max_per_job else {}),
            )
        return Diagnosis(
            category=WaitCategory.QUOTA,
            limit=Limit.PER_JOB,
            reason=reason,
            figures={"asked": job.gpus, "limit": tier.max_per_job},
            clears_by_itself=False,
            can_never_start=True,
        )
    if USER_CAP.match(reason):
        # Arbiter compiles no per-user limit (a tier's per-job cap is MaxTRESPerJob only): one
        # was set by hand on the QOS, and its value is not known here.
        return Diagnosis(
            category=WaitCategory.QUOTA,
            limit=Limit.USER_CAP,
            reason=reason,
            figures={
                "used": _sum(row for row in in_tier if row.user == job.user),
                "asked": job.gpus,
            },
            clears_by_itself=None,
        )
    if TIER_CAP.match(reason):
        used = _sum(in_tier)
        if tier is None or tier.max_total is None or used + job.gpus <= tier.max_total:
            return _unknown(
                job,
                "tier_room",
                used=used,
                asked=job.gpus,
                **({"limit": tier.max_total} if tier and tier.max_total else {}),
            )
        return Diagnosis(
            category=WaitCategory.QUOTA,
            limit=Limit.TIER_CAP,
            reason=reason,
            figures={"used": used, "limit": tier.max_total, "asked": job.gpus},
            holders=_by_project(in_tier),
            clears_by_itself=job.gpus <= tier.max_total,
            can_never_start=job.gpus > tier.max_total,
        )
    # The project's quota of the flavor in the pool.
    if job.project is None or job.pool is None or job.flavor is None:
        return _unknown(job, "keys_unknown", asked=job.gpus)
    key = (job.project, job.pool, job.flavor)
    used_rows = [
        row
        for row in state.running
        if row.project == job.project and row.pool == job.pool and row.flavor == job.flavor
    ]
    used = _sum(used_rows)
    # No quota of the flavor in the pool: the scheduler's typed limit is 0.
    maximum = state.quotas.get(key, 0)
    if maximum is None:
        maximum = state.capacity.get((job.pool, job.flavor), 0)
    if maximum > 0 and used + job.gpus <= maximum:
        return _unknown(
            job,
            "quota_room",
            used=used,
            limit=maximum,
            asked=job.gpus,
        )
    return Diagnosis(
        category=WaitCategory.QUOTA,
        limit=Limit.PROJECT_QUOTA,
        reason=reason,
        figures={"used": used, "limit": maximum, "asked": job.gpus},
        holders=_by_project(used_rows),
        clears_by_itself=0 < job.gpus <= maximum,
        can_never_start=job.gpus > maximum,
    )


def _resource(state: QueueState, job: Asked) -> Diagnosis:
    if job.pool is None or job.flavor is None:
        return _unknown(job, "keys_unknown", asked=job.gpus)
    capacity = state.capacity.get((job.pool, job.flavor))
    if capacity is None:
        return _unknown(job, "no_capacity")
    rows = [row for row in state.running if row.pool == job.pool and row.flavor == job.flavor]
    running = _sum(rows)
    free = max(0.0, capacity - running)
    if free >= job.gpus:
        return _unknown(
            job,
            "capacity_free",
            capacity=capacity,
            running=running,
            free=free,
            asked=job.gpus,
        )
    return Diagnosis(
        category=WaitCategory.RESOURCE,
        limit=Limit.POOL_CAPACITY,
        reason=job.reason,
        figures={"capacity": capacity, "running": running, "free": free, "asked": job.gpus},
        holders=_by_project(rows),
        clears_by_itself=job.gpus <= capacity,
        can_never_start=job.gpus > capacity,
    )


def _queue_rule(state: QueueState, job: Asked) -> Diagnosis:
    reason = job.reason
    if reason in HELD:
        return Diagnosis(WaitCategory.QUEUE_RULE, Limit.HOLD, reason, clears_by_itself=False)
    if reason == "BeginTime":
        return Diagnosis(WaitCategory.QUEUE_RULE, Limit.BEGIN_TIME, reason, clears_by_itself=True)
    if reason == "Priority":
        ahead = jobs_ahead(state, job)
        if not ahead:
            return _unknown(job, "none_ahead")
        return Diagnosis(
            WaitCategory.QUEUE_RULE,
            Limit.JOBS_AHEAD,
            reason,
            figures={"ahead": len(ahead), "ahead_gpus": float(sum(o.gpus for o in ahead))},
            ahead=ahead[:AHEAD_SHOWN],
            ahead_count=len(ahead),
            clears_by_itself=True,
        )
    return Diagnosis(WaitCategory.QUEUE_RULE, Limit.QUEUE_RULE, reason, clears_by_itself=None)


def diagnose(state: QueueState, job: Asked) -> Diagnosis:
    """Why ``job`` waits, from ``state`` alone (see the module's docstring)."""
    if state.live is not None:
        from .live_diagnosis import live_diagnose

        found = live_diagnose(state, job)
        if found is not None:
            found.live = True
            return found
    category = job.category
    if category == WaitCategory.QUOTA:
        return _quota(state, job)
    if category == WaitCategory.RESOURCE:
        return _resource(state, job)
    if category == WaitCategory.QUEUE_RULE:
        return _queue_rule(state, job)
    if category == WaitCategory.DEPENDENCY:
        never = job.reason in NEVER
        return Diagnosis(
            WaitCategory.DEPENDENCY,
            Limit.DEPENDENCY,
            job.reason,
            clears_by_itself=not never,
            can_never_start=never,
        )
    if category == WaitCategory.PLACEMENT:
        return Diagnosis(
            WaitCategory.PLACEMENT,
            Limit.CONSTRAINT,
            job.reason,
            clears_by_itself=False if job.constraints else None,
        )
    return _unknown(job, "reason_unknown")
