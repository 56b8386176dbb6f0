"""The words and value types of a wait's diagnosis, shared by ``diagnosis`` (the answer from
Arbiter's records) and ``live_diagnosis`` (the answer from what Slurm holds now): the limits
(``Limit``), the scheduler reason tokens each reads, the queue's state, the pending job, and
the answer (``Diagnosis``). See ``diagnosis`` for what each limit means.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

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


def gpus_sum(rows: Iterable[Running]) -> float:
    return float(sum(row.gpus for row in rows))


def by_project(rows: Iterable[Running]) -> dict[int | None, float]:
    holders: dict[int | None, float] = {}
    for row in rows:
        holders[row.project] = holders.get(row.project, 0.0) + row.gpus
    return dict(sorted(holders.items(), key=lambda item: -item[1]))
