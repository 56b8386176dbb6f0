"""Reading the live QOS, accounts, user associations and named jobs from Slurm."""

from __future__ import annotations

from collections.abc import Iterable

from queues.schedulers.backends import JOB, LiveState, State, gc_paused
from queues.schedulers.slurm.values import (
    ACCOUNT,
    ASSOCIATION,
    JOB_ID,
    LIMIT_COLUMNS,
    LIMIT_OPTIONS,
    MARK,
    ORGANIZATION,
    QOS,
    association_name,
    format_list,
    format_tres,
    parse_seconds,
    parse_tres,
)

from .commands import SlurmCommands


@gc_paused()
def read_live(commands: SlurmCommands, *, cluster_name: str, jobs: Iterable[str] = ()) -> LiveState:
    """Two read calls (QOS; accounts with their associations and every limit), and one
    ``squeue`` for the named jobs when there are any. (Slurm's user list is not read: nothing
    compares it, and ``sacctmgr load`` adds a member's user with the association.)"""
    objects: State = {QOS: {}, ACCOUNT: {}, ASSOCIATION: {}, JOB: {}}
    managed: dict[str, set[str]] = {QOS: set(), ACCOUNT: set(), ASSOCIATION: set()}
    for row in commands.sacctmgr_read(
        "show",
        "qos",
        "format=name,description,priority,preempt,preemptmode,grptres,maxtres,maxtrespu,"
        "maxtrespa,gracetime,preemptexempttime",
    ):
        name, descr, priority, preempt, mode, grp, max_job, max_user, max_account, grace, exempt = (
            row + [""] * 11
        )[:11]
        objects[QOS][name] = {
            "description": descr,
            "priority": priority,
            "preempt": format_list(v for v in preempt.split(",") if v),
            "preempt_mode": mode,
            "grp_tres": format_tres(parse_tres(grp)),  # type: ignore[arg-type]
            "max_tres_per_job": format_tres(parse_tres(max_job)),  # type: ignore[arg-type]
            "max_tres_per_user": format_tres(parse_tres(max_user)),  # type: ignore[arg-type]
            "max_tres_per_account": format_tres(parse_tres(max_account)),  # type: ignore[arg-type]
            "grace_time": "" if parse_seconds(grace) in ("", "0") else parse_seconds(grace),
            "preempt_exempt_time": parse_seconds(exempt),
        }
        if descr.lower().startswith(MARK):
            managed[QOS].add(name)
    for row in commands.sacctmgr_read(
        "show",
        "account",
        "withassoc",
        "format=account,description,organization,parentname,user,share,qos,defaultqos,grptres,"
        + LIMIT_COLUMNS,
        "where",
        f"cluster={cluster_name}",
    ):
        width = 9 + len(LIMIT_OPTIONS)
        account, descr, org, parent, user, share, qos, default_qos, grp, *rest = (
            row + [""] * width
        )[:width]
        limits = {
            name: _limit(name, value) for name, value in zip(LIMIT_OPTIONS, rest, strict=True)
        }
        if not user:
            objects[ACCOUNT][account] = {
                "description": descr,
                "organization": org,
                "parent": parent,
                "fairshare": share,
                "grp_tres": format_tres(parse_tres(grp)),  # type: ignore[arg-type]
                **limits,
            }
            if org.lower() == ORGANIZATION:
                managed[ACCOUNT].add(account)
        else:
            name = association_name(user, account)
            objects[ASSOCIATION][name] = {
                "qos": format_list(v for v in qos.split(",") if v),
                "default_qos": default_qos,
                "grp_tres": format_tres(parse_tres(grp)),  # type: ignore[arg-type]
                **limits,
            }
            if org.lower() == ORGANIZATION:
                managed[ASSOCIATION].add(name)
    ids = sorted({job for job in jobs if JOB_ID.match(job)})
    if ids:
        for job, state, qos_name, account, user in commands.squeue_jobs(ids):
            objects[JOB][job] = {
                "state": state,
                "qos": qos_name,
                "account": account,
                "user": user,
            }
    return LiveState(objects=objects, managed=managed)


def _limit(name: str, value: str) -> str:
    if name == "max_tres_per_job":
        return format_tres(parse_tres(value))  # type: ignore[arg-type]
    if name == "max_wall":
        return parse_seconds(value)
    return value.strip()
