"""Why a job waits: scheduler reasons mapped onto the five wait categories.

The tables follow the scheduler reference (Slurm ``job_state_reason.c`` strings, Kueue
condition reasons and message templates, kube-scheduler ``FailedScheduling`` texts). A
reason no table knows is kept as it is and classified ``unclassified``, never guessed.

Each verdict also says whether the wait clears by itself (the queue moves, usage drops, a
dependency finishes) or needs a change (a quota exception, a different request, an admin).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from queues.models import WaitCategory

RESOURCE = WaitCategory.RESOURCE
QUOTA = WaitCategory.QUOTA
QUEUE = WaitCategory.QUEUE_RULE
DEPENDENCY = WaitCategory.DEPENDENCY
PLACEMENT = WaitCategory.PLACEMENT
UNCLASSIFIED = WaitCategory.UNCLASSIFIED

SLURM = "slurm"
KUEUE = "kueue"
KUBE = "kube"
TRACE = "trace"
SCHEDULERS = (SLURM, KUEUE, KUBE, TRACE)


@dataclass(frozen=True)
class Verdict:
    category: WaitCategory
    clears_by_itself: bool | None
    reason: str = ""

    @property
    def known(self) -> bool:
        return self.category != UNCLASSIFIED


def unclassified(reason: str) -> Verdict:
    return Verdict(UNCLASSIFIED, None, reason)


# --- Slurm (``squeue -o %r``) ----------------------------------------------------------------

# Exact reasons: (category, clears by itself).
SLURM_REASONS: dict[str, tuple[WaitCategory, bool]] = {
    # 1 Resource shortage: the pool is busy.
    "Resources": (RESOURCE, True),
    "Licenses": (RESOURCE, True),
    "BurstBufferResources": (RESOURCE, True),
    "NvidiaImexChannels": (RESOURCE, True),
    "MpiPortsBusy": (RESOURCE, True),
    "MaxPoweredUpNodes": (RESOURCE, True),
    # 2a Quota, aggregate: clears as the project's usage drops.
    "AssocMaxJobsLimit": (QUOTA, True),
    "AssocMaxSubmitJobLimit": (QUOTA, True),
    "AssociationJobLimit": (QUOTA, True),
    "AssociationResourceLimit": (QUOTA, True),
    "AssociationTimeLimit": (QUOTA, True),
    "QOSJobLimit": (QUOTA, True),
    "QOSResourceLimit": (QUOTA, True),
    "QOSTimeLimit": (QUOTA, True),
    "QOSUsageThreshold": (QUOTA, True),
    "AccountingPolicy": (QUOTA, True),
    # 2b Quota, per-job ceiling: never clears without a change or an exception.
    "MaxMemPerLimit": (QUOTA, False),
    # 3 Queue rule, ordering, admin.
    "Priority": (QUEUE, True),
    "None": (QUEUE, True),
    "BeginTime": (QUEUE, True),
    "JobHeldAdmin": (QUEUE, False),
    "JobHeldUser": (QUEUE, False),
    "JobHoldMaxRequeue": (QUEUE, False),
    "Reservation": (QUEUE, True),
    "ReservationDeleted": (QUEUE, False),
    "ReservationInvalid": (QUEUE, False),
    "SchedDefer": (QUEUE, True),
    "PartitionConfig": (QUEUE, False),
    "PartitionTimeLimit": (QUEUE, False),
    "PartitionNodeLimit": (QUEUE, False),
    "PartitionDown": (QUEUE, False),
    "PartitionInactive": (QUEUE, False),
    "QOSNotAllowed": (QUEUE, False),
    "AccountNotAllowed": (QUEUE, False),
    "InvalidQOS": (QUEUE, False),
    "InvalidAccount": (QUEUE, False),
    "DeadLine": (QUEUE, False),
    "FedJobLock": (QUEUE, True),
    "JobArrayTaskLimit": (QUEUE, True),
    # 4 Dependency.
    "Dependency": (DEPENDENCY, True),
    "DependencyNeverSatisfied": (DEPENDENCY, False),
    # 5 Node label, constraint, runtime.
    "ReqNodeNotAvail": (PLACEMENT, False),
    "BadConstraints": (PLACEMENT, False),
    "Constraints": (PLACEMENT, True),
    "NodeDown": (PLACEMENT, False),
    "Prolog": (PLACEMENT, True),
    "Cleaning": (PLACEMENT, True),
    "BurstBufferStageIn": (PLACEMENT, True),
    "BurstBufferOperation": (PLACEMENT, True),
    "JobLaunchFailure": (PLACEMENT, False),
    "SystemFailure": (PLACEMENT, False),
}

# Families of quota reasons, most specific first (a per-job ceiling before an aggregate).
SLURM_PATTERNS: tuple[tuple[re.Pattern[str], WaitCategory, bool], ...] = (
    (re.compile(r"^(Assoc|QOS)Max\w*PerJob\w*$"), QUOTA, False),
    (re.compile(r"^(Assoc|QOS)Max\w*PerNode\w*$"), QUOTA, False),
    (re.compile(r"^QOSMin\w+$"), QUOTA, False),
    (re.compile(r"^(Assoc|QOS)Grp\w+$"), QUOTA, True),
    (re.compile(r"^Max\w*RunMinsPer(User|Account)\w*$"), QUOTA, True),
    (re.compile(r"^Max\w*PerAccount\w*$"), QUOTA, True),
    (re.compile(r"^QOSMax\w*PerUser\w*$"), QUOTA, True),
)

# Reasons a finished job carries; they say why it ended, not why it waited.
SLURM_TERMINAL = frozenset(
    {"NonZeroExitCode", "RaisedSignal", "TimeLimit", "InactiveLimit", "OutOfMemory"}
)


def slurm_reason_token(reason: str) -> str:
    """``ReqNodeNotAvail, UnavailableNodes:gpu01`` → ``ReqNodeNotAvail``; ``(Resources)`` too."""
    token = reason.strip().strip("()").strip()
    return re.split(r"[\s,]", token, maxsplit=1)[0] if token else ""


def classify_slurm(reason: str) -> Verdict:
    token = slurm_reason_token(reason)
    if token in SLURM_REASONS:
        category, clears = SLURM_REASONS[token]
        return Verdict(category, clears, token)
    for pattern, category, clears in SLURM_PATTERNS:
        if pattern.match(token):
            return Verdict(category, clears, token)
    return unclassified(token)


# --- Kueue (Workload conditions) --------------------------------------------------------------

WAITING_FOR_QUOTA = "WaitingForQuota"

KUEUE_REASONS: dict[str, tuple[WaitCategory, bool]] = {
    # QuotaReserved=False, flavor-independent (KEP-10852 precedence order).
    "Deactivated": (QUEUE, False),
    "OnHold": (QUEUE, False),
    "Misconfigured": (QUEUE, False),
    "NoMatchingFlavor": (PLACEMENT, False),
    "Suspended": (QUEUE, False),
    "AdmissionGated": (QUEUE, False),
    "WaitingForPodsReady": (QUEUE, True),
    # QuotaReserved=False, nominated flavor. WaitingForQuota depends on the queue's usage.
    "ExceedsMaxQuota": (QUOTA, False),
    "TopologyPlacementFailed": (PLACEMENT, True),
    "WaitingForPreemptedWorkloads": (RESOURCE, True),
    "PendingEvaluation": (QUEUE, True),
    # Legacy (gate off): PodsReady's Waiting.
    "Waiting": (QUEUE, True),
    # Admitted=False.
    "UnsatisfiedAdmissionChecks": (QUEUE, True),
    "PendingDelayedTopologyRequests": (PLACEMENT, True),
    # BlockedOnPreemptionGates=True.
    "PreemptionGated": (QUEUE, False),
}
# Reasons whose message, not the reason, says why (legacy ``Pending``/``Inadmissible``, and
# ``NoReservation``, which only says the QuotaReserved condition holds the answer).
KUEUE_BY_MESSAGE = frozenset({"Pending", "Inadmissible", "NoReservation"})

# Message templates, checked in order (the first match decides).
KUEUE_MESSAGES: tuple[tuple[re.Pattern[str], WaitCategory | str, bool], ...] = (
    (re.compile(r"insufficient quota\b.*maximum capacity"), QUOTA, False),
    (re.compile(r"insufficient unused quota for"), WAITING_FOR_QUOTA, True),
    (re.compile(r"doesn't match node affinity"), PLACEMENT, False),
    (re.compile(r"untolerated taint"), PLACEMENT, False),
    (re.compile(r"flavor \S+ not found"), PLACEMENT, False),
    (re.compile(r"resource \S+ unavailable in ClusterQueue"), QUEUE, False),
    (re.compile(r"namespace doesn't match ClusterQueue selector"), QUEUE, False),
    (
        re.compile(r"(LocalQueue|ClusterQueue) \S+ (doesn't exist|is inactive|is stopped)"),
        QUEUE,
        False,
    ),
    (re.compile(r"ClusterQueue \S+ not found|localQueue doesn't exist or inactive"), QUEUE, False),
    (re.compile(r"requires preemption, but it's gated"), QUEUE, False),
    (re.compile(r"Pending the preemption of|Preempting \d+ workload\(s\) failed"), RESOURCE, True),
    (re.compile(r"no longer fits after processing another workload"), RESOURCE, True),
    (re.compile(r"overlapping preemption targets"), RESOURCE, True),
    (re.compile(r"failed admission checks|Failed to admit workload"), QUEUE, False),
)


@dataclass(frozen=True)
class QuotaPosition:
    """What Arbiter knows of the queue's quota for the flavor the job asks for."""

    used: float
    guarantee: int
    maximum: int | None  # None: may borrow up to what the pool has
    request: float = 0

    @property
    def cannot_borrow(self) -> bool:
        return self.maximum is not None and self.used + self.request > self.maximum


def waiting_for_quota(position: QuotaPosition | None) -> Verdict:
    """Quota limit when the queue is at or above its guarantee and cannot borrow more;
    resource shortage when it is under its guarantee (the cohort lent the capacity out)
    or may still borrow but the pool has nothing left to lend."""
    if position is None:  # Kueue itself says quota: with nothing to compare, believe it
        return Verdict(QUOTA, True, WAITING_FOR_QUOTA)
    if position.used >= position.guarantee and position.cannot_borrow:
        return Verdict(QUOTA, True, WAITING_FOR_QUOTA)
    return Verdict(RESOURCE, True, WAITING_FOR_QUOTA)


def classify_kueue(
    reason: str, message: str = "", position: QuotaPosition | None = None
) -> Verdict:
    reason = reason.strip()
    if reason == WAITING_FOR_QUOTA:
        return waiting_for_quota(position)
    if reason in KUEUE_REASONS:
        category, clears = KUEUE_REASONS[reason]
        return Verdict(category, clears, reason)
    if reason in KUEUE_BY_MESSAGE or not reason:
        for pattern, found, clears in KUEUE_MESSAGES:
            if pattern.search(message):
                if found == WAITING_FOR_QUOTA:
                    return Verdict(waiting_for_quota(position).category, clears, reason)
                return Verdict(WaitCategory(found), clears, reason)
    return unclassified(reason)


# --- kube-scheduler (pod ``FailedScheduling``, ``PodScheduled=False``) -----------------------

KUBE_INSUFFICIENT = re.compile(r"\bInsufficient \S+")
KUBE_PLACEMENT = re.compile(
    r"didn't match Pod's node affinity/selector|had untolerated taint|"
    r"didn't match pod (anti-)?affinity rules|didn't find available persistent volumes|"
    r"ImagePullBackOff|ErrImagePull|CreateContainerConfigError|CrashLoopBackOff"
)
KUBE_QUOTA = re.compile(r"exceeded quota:")
KUBE_GATED = re.compile(r"SchedulingGated|scheduling gates?", re.IGNORECASE)


def classify_kube(reason: str, message: str = "") -> Verdict:
    """Any node short of a resource makes it a shortage (freeing GPUs would help); only when
    every node fails on labels, taints or the runtime is it a placement problem."""
    reason = reason.strip()
    if KUBE_QUOTA.search(message):
        return Verdict(QUOTA, True, reason)
    if reason == "SchedulingGated" or KUBE_GATED.search(message):
        return Verdict(QUEUE, False, reason)
    if KUBE_INSUFFICIENT.search(message):
        return Verdict(RESOURCE, True, reason)
    if KUBE_PLACEMENT.search(message) or reason in {"ErrImagePull", "ImagePullBackOff"}:
        return Verdict(PLACEMENT, False, reason)
    return unclassified(reason)


def classify(
    *,
    scheduler: str,
    reason: str,
    message: str = "",
    position: QuotaPosition | None = None,
) -> Verdict:
    """The category of one pending reason from ``scheduler`` (slurm, kueue, kube, trace)."""
    if scheduler == SLURM:
        return classify_slurm(reason)
    if scheduler == KUEUE:
        return classify_kueue(reason, message, position)
    if scheduler == KUBE:
        return classify_kube(reason, message)
    return unclassified(reason.strip())
