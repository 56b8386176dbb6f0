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

from queues.models import WaitCategory

from .diagnosis_values import (
    AHEAD_SHOWN,
    ASSOCIATION_COUNTS,
    CAN_START,
    HELD,
    NEVER,
    PER_JOB,
    TIER_CAP,
    UNKNOWN,
    USER_CAP,
    Asked,
    Diagnosis,
    Limit,
    QueueState,
    Running,
    TierRule,
    Waiting,
    by_project,
    gpus_sum,
)
from .live_diagnosis import live_diagnose

# The value types and the vocabulary live in ``diagnosis_values`` (``live_diagnosis`` builds
# them too); they are named here as well, where the answers' readers have always found them.
__all__ = [
    "AHEAD_SHOWN",
    "UNKNOWN",
    "Asked",
    "Diagnosis",
    "Limit",
    "QueueState",
    "Running",
    "TierRule",
    "Waiting",
    "diagnose",
    "jobs_ahead",
]


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
                "used": gpus_sum(row for row in in_tier if row.user == job.user),
                "asked": job.gpus,
            },
            clears_by_itself=None,
        )
    if TIER_CAP.match(reason):
        used = gpus_sum(in_tier)
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
            holders=by_project(in_tier),
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
    used = gpus_sum(used_rows)
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
        holders=by_project(used_rows),
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
    running = gpus_sum(rows)
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
        holders=by_project(rows),
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
