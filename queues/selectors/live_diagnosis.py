"""Why one pending Slurm job waits, every figure as Slurm holds it at the moment of the
answer (``queues.services.slurm.waits.LiveWait``, in ``QueueState.live``).

The limits are the ones of ``diagnosis`` (same vocabulary, same ``Diagnosis``, both from
``diagnosis_values``), read from slurmctld instead of Arbiter's records: the account's
``GrpTRES`` and its use, the tier's QOS (its cap split over them) and their use, the QOS's
per-job and per-user caps, limits set by hand on the account or user with their values, the
GPUs of each type on the nodes that can run jobs, and the pending jobs ahead that could start.
A job that asks for a GPU type its account has no quota for (``--exclusive`` included: Slurm
22.05 gives it every GPU of the node), or more than its QOS's per-job cap, can never start,
and the answer says what to submit instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queues.models import WaitCategory

from .diagnosis_values import (
    AHEAD_SHOWN,
    ASSOCIATION_COUNTS,
    HELD,
    NEVER,
    PER_JOB,
    TIER_CAP,
    USER_CAP,
    Asked,
    Diagnosis,
    Limit,
    QueueState,
    Waiting,
    by_project,
)


def _typed_quota(live: Any) -> list[str]:
    """The GPU types the job's account has quota for (a typed limit above 0)."""
    return sorted(
        key.removeprefix("gres/gpu:")
        for key, (limit, _used) in live.account_limits.items()
        if key.startswith("gres/gpu:") and (limit is None or limit > 0)
    )


def _never_by_type(live: Any) -> Diagnosis | None:
    """A job asking for a GPU type its account has no quota for (typed limit 0), or an
    ``--exclusive`` job that would get such GPUs with the node: it can never start."""
    asked: dict[str, int] = {}
    if live.exclusive and live.node_types:
        asked = dict(live.node_types)  # Slurm 22.05 gives it every GRES of the node
    elif live.gpu_type:
        asked = {live.gpu_type: live.asked}

    def limit_of(kind: str) -> tuple[int | None, int]:
        return live.account_limits.get(f"gres/gpu:{kind}", (None, 0))

    # A type without quota first: that is the one to name.
    for kind, count in sorted(asked.items(), key=lambda item: (limit_of(item[0])[0] or 0, item)):
        limit, used = limit_of(kind)
        if limit is not None and count > limit:
            types = [t for t in _typed_quota(live) if t != kind]
            details = {"type": kind}
            if live.exclusive:
                details["exclusive"] = "yes"
                details["submit"] = "--gres=gpu:%s:N (without --exclusive)" % (
                    live.gpu_type or (types[0] if types else "<type>")
                )
            elif types:
                details["submit"] = (
                    f"--gres=gpu:{types[0]}:{min(live.asked, _room(live, types[0]))}"
                )
            return Diagnosis(
                category=WaitCategory.QUOTA,
                limit=Limit.PROJECT_QUOTA,
                reason=live.reason,
                figures={"used": float(used), "limit": float(limit), "asked": float(count)},
                clears_by_itself=False,
                can_never_start=True,
                details=details,
            )
    return None


def _room(live: Any, kind: str) -> int:
    limit, _used = live.account_limits.get(f"gres/gpu:{kind}", (None, 0))
    return live.asked if limit is None else max(1, limit)


def live_diagnose(state: QueueState, job: Asked) -> Diagnosis | None:
    """Why the job waits, every figure as Slurm holds it now (``state.live``); None when the
    reason is one the live figures do not cover (the answer then reads Arbiter's records)."""
    live = state.live
    for applies, diagnose in _BY_REASON:
        if applies(live):
            return diagnose(state, job, live, float(live.asked))
    return None


def _held(state: QueueState, job: Asked, live: Any, asked: float) -> Diagnosis | None:
    return Diagnosis(WaitCategory.QUEUE_RULE, Limit.HOLD, live.reason, clears_by_itself=False)


def _dependency(state: QueueState, job: Asked, live: Any, asked: float) -> Diagnosis | None:
    never = live.reason in NEVER
    waits_on = ", ".join(
        f"{job_id} ({state_})" for job_id, state_ in sorted(live.dependency_states.items())
    )
    return Diagnosis(
        WaitCategory.DEPENDENCY,
        Limit.DEPENDENCY,
        live.reason,
        clears_by_itself=not never,
        can_never_start=never,
        details={"dependency": live.dependency, "waits_on": waits_on},
    )


def _association_counts(state: QueueState, job: Asked, live: Any, asked: float) -> Diagnosis | None:
    held = [h for h in live.hand_set if "Jobs" in h[1] or "Submit" in h[1]]
    details = {}
    figures: dict[str, float] = {}
    if held:
        where, name, limit, used = held[0]
        details["setting"] = f"{name}={limit} ({where})"
        figures = {"limit": float(limit), "jobs": float(used)}
    return Diagnosis(
        WaitCategory.QUOTA,
        Limit.ASSOCIATION,
        live.reason,
        figures=figures,
        clears_by_itself=False if held and held[0][2] == 0 else None,
        can_never_start=bool(held and held[0][2] == 0),
        details=details,
    )


def _per_job(state: QueueState, job: Asked, live: Any, asked: float) -> Diagnosis | None:
    never = asked > live.per_job
    return Diagnosis(
        WaitCategory.QUOTA,
        Limit.PER_JOB,
        live.reason,
        figures={"asked": asked, "limit": float(live.per_job)},
        clears_by_itself=False,
        can_never_start=never,
        details={
            "submit": f"--gres=gpu:{live.gpu_type + ':' if live.gpu_type else ''}{live.per_job}",
            "qos": live.qos,
        },
    )


def _user_cap(state: QueueState, job: Asked, live: Any, asked: float) -> Diagnosis | None:
    limit, used = live.per_user
    return Diagnosis(
        WaitCategory.QUOTA,
        Limit.USER_CAP,
        live.reason,
        figures={"used": float(used), "limit": float(limit), "asked": asked},
        clears_by_itself=asked <= limit,
        can_never_start=asked > limit,
        details={"setting": f"MaxTRESPerUser=gres/gpu={limit} ({live.qos})"},
    )


def _tier_cap(state: QueueState, job: Asked, live: Any, asked: float) -> Diagnosis | None:
    used, limit = float(live.tier_used), float(live.tier_limit)
    share_limit, share_used = live.share
    figures = {"used": used, "limit": limit, "asked": asked}
    details = {"qos": ", ".join(live.tier_qos)}
    if share_limit is not None and len(live.tier_qos) > 1:
        figures.update(share=float(share_limit), share_used=float(share_used))
        if used + asked <= limit:
            # The tier has room, its QOS's share not yet: the next rebalance moves it.
            details["share_moves"] = "yes"
    in_tier = [row for row in state.running if row.tier == job.tier]
    return Diagnosis(
        WaitCategory.QUOTA,
        Limit.TIER_CAP,
        live.reason,
        figures=figures,
        holders=by_project(in_tier),
        clears_by_itself=asked <= limit,
        can_never_start=asked > limit,
        details=details,
    )


def _account_quota(state: QueueState, job: Asked, live: Any, asked: float) -> Diagnosis | None:
    impossible = _never_by_type(live)
    if impossible is not None:
        return impossible
    key = f"gres/gpu:{live.gpu_type}" if live.gpu_type else "gres/gpu"
    limit, used = live.account_limits.get(key, (None, 0))
    if limit is None or used + asked <= limit:
        # The typed limit has room: the untyped total is the one that holds.
        limit, used = live.account_limits.get("gres/gpu", (None, 0))
    if limit is None:
        return None
    used_rows = [row for row in state.running if row.project == job.project]
    return Diagnosis(
        WaitCategory.QUOTA,
        Limit.PROJECT_QUOTA,
        live.reason,
        figures={"used": float(used), "limit": float(limit), "asked": asked},
        holders=by_project(used_rows),
        clears_by_itself=0 < asked <= limit,
        can_never_start=asked > limit,
        details={"account": live.account},
    )


def _resources(state: QueueState, job: Asked, live: Any, asked: float) -> Diagnosis | None:
    impossible = _never_by_type(live)
    if impossible is not None:
        return impossible
    total, allocated = live.nodes.get(live.gpu_type, (0, 0))
    free = float(max(0, total - allocated))
    details = {}
    if state.declared is not None and state.declared != total:
        details["mismatch"] = f"{state.declared}"
    rows = [row for row in state.running if row.flavor == job.flavor]
    return Diagnosis(
        WaitCategory.RESOURCE,
        Limit.POOL_CAPACITY,
        live.reason,
        figures={
            "capacity": float(total),
            "running": float(allocated),
            "free": free,
            "asked": asked,
        },
        holders=by_project(rows),
        clears_by_itself=asked <= total,
        can_never_start=asked > total,
        details=details,
    )


def _priority(state: QueueState, job: Asked, live: Any, asked: float) -> Diagnosis | None:
    ahead = [
        Waiting(
            job_id=o.job_id,
            project=None,
            tier=None,
            tier_score=o.priority,
            flavor=None,
            pool=None,
            gpus=float(o.gpus),
            submitted=None,
            reason=o.reason,
        )
        for o in live.ahead
    ]
    if not ahead:
        return None
    details = {"never": str(live.ahead_never)} if live.ahead_never else {}
    return Diagnosis(
        WaitCategory.QUEUE_RULE,
        Limit.JOBS_AHEAD,
        live.reason,
        figures={"ahead": float(len(ahead)), "ahead_gpus": float(sum(o.gpus for o in ahead))},
        ahead=ahead[:AHEAD_SHOWN],
        ahead_count=len(ahead),
        clears_by_itself=True,
        details=details,
    )


# Each reason Slurm gives, with what it takes to answer it from the live figures; the first
# that applies answers.
_BY_REASON: list[
    tuple[Callable[[Any], bool], Callable[[QueueState, Asked, Any, float], Diagnosis | None]]
] = [
    (lambda live: live.reason in HELD, _held),
    (lambda live: live.reason in ("Dependency", "DependencyNeverSatisfied"), _dependency),
    (lambda live: live.reason in ASSOCIATION_COUNTS, _association_counts),
    (lambda live: bool(PER_JOB.match(live.reason)) and live.per_job is not None, _per_job),
    (lambda live: bool(USER_CAP.match(live.reason)) and live.per_user[0] is not None, _user_cap),
    (lambda live: bool(TIER_CAP.match(live.reason)) and live.tier_limit is not None, _tier_cap),
    (lambda live: live.reason.startswith("AssocGrp"), _account_quota),
    (lambda live: live.reason == "Resources", _resources),
    (lambda live: live.reason == "Priority", _priority),
]
