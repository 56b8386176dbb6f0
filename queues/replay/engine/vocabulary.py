"""The replay's vocabulary: Slurm's reason tokens and their categories, the result, a flavor's
GPUs and what is lent."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..rules import Job, QuotaRule

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
