"""Resolving the jobs that grants name against the live queue (``settle``)."""

from __future__ import annotations

from django.utils.translation import gettext as _

from queues.schedulers.backends import JOB, Action, Change, LiveState, State
from queues.schedulers.slurm.values import (
    ASSOCIATION,
    JOB_ID,
    PENDING,
    PROTECTED,
    QOS,
    association_name,
    format_list,
    unprotected,
)


def settle(*, desired: State, live: LiveState, applied: State) -> tuple[State, list[Change]]:
    """Resolve the named jobs against the live queue.

    Returns the desired state with ``JOB`` holding, per job Arbiter moves (or keeps
    where it put it), the QOS it wants and the one to move back to, the user associations
    that must allow those QOS, and the named jobs left alone (``skip`` changes).
    """
    # one piece: both passes (the named jobs, then the grants that ended) widen the same
    # association QOS lists that ``allowed`` reads back, so each decision sees the ones
    # made before it.
    qos = desired.get(QOS, {})
    found_jobs = live.objects.get(JOB, {})
    associations = {name: dict(f) for name, f in desired.get(ASSOCIATION, {}).items()}
    tracked = applied.get(JOB, {})
    settled: dict[str, dict[str, str]] = {}
    skipped: list[Change] = []

    def allowed(association: str) -> set[str]:
        fields = associations.get(association) or live.objects[ASSOCIATION].get(association, {})
        return {name for name in fields.get("qos", "").split(",") if name}

    def tier_of(name: str) -> str:
        base = unprotected(name)
        return base if "." not in base and base in qos else ""

    for job, request in sorted(desired.get(JOB, {}).items(), key=job_order):
        found = found_jobs.get(job)
        why = ""
        if not JOB_ID.match(job):
            why = _("not a Slurm job id")
        elif found is None:
            why = _("not in the queue (finished long ago, or never submitted here)")
        elif found["state"] != PENDING:
            why = _("%(state)s: only pending jobs are moved") % {"state": found["state"].lower()}
        elif found["account"] not in request["accounts"].split(","):
            why = _("runs under account %(account)s, not one of project %(project)s") % {
                "account": found["account"],
                "project": request["project"],
            }
        if why or found is None:
            skipped.append(Change(kind=JOB, name=job, action=Action.SKIP, note=str(why)))
            if found is not None and job in tracked:
                # Started while its grant lasts: still allowed, moved back if requeued later.
                settled[job] = tracked[job]
                association = association_name(found["user"], found["account"])
                if association in associations:
                    associations[association]["qos"] = format_list(
                        allowed(association) | {tracked[job]["qos"]}
                    )
            continue
        current = tier_of(found["qos"])
        base = request["tier"] or current or request["base"]
        if request["tier"] and current and qos_priority(qos, current) > qos_priority(qos, base):
            base = current  # a grant only ever raises a job
        protect = request["protect"] or found["account"] in request["protected_accounts"]
        target = base + PROTECTED if protect and base else base
        association = association_name(found["user"], found["account"])
        if target not in qos:
            why = _("no QOS %(qos)s is managed here") % {"qos": target or "-"}
        elif target not in allowed(association) and association not in associations:
            why = _(
                "the association of %(user)s with %(account)s is not Arbiter's and does "
                "not allow QOS %(qos)s"
            ) % {"user": found["user"], "account": found["account"], "qos": target}
        if why:
            skipped.append(Change(kind=JOB, name=job, action=Action.SKIP, note=str(why)))
            continue
        if association in associations:
            associations[association]["qos"] = format_list(allowed(association) | {target})
        restore = tracked.get(job, {}).get("restore") or found["qos"]
        settled[job] = {"qos": target, "restore": restore}

    # Grants that ended: a job still pending where Arbiter put it goes back; one that
    # runs stays tracked until it leaves the queue (a requeued job is pending again).
    for job, previous in tracked.items():
        found = found_jobs.get(job)
        if (
            job in desired.get(JOB, {})
            or previous["qos"] == previous["restore"]
            or found is None
            or found["qos"] != previous["qos"]
        ):
            continue
        if found["state"] != PENDING:
            settled[job] = previous
            continue
        association = association_name(found["user"], found["account"])
        restore = previous["restore"]
        if restore not in allowed(association):
            fields = associations.get(association) or live.objects[ASSOCIATION].get(association, {})
            restore = fields.get("default_qos", "")
        if restore and restore != found["qos"]:
            settled[job] = {"qos": restore, "restore": restore}
    return {**desired, ASSOCIATION: associations, JOB: settled}, skipped


def job_order(item: tuple[str, object]) -> tuple[int, str]:
    return (len(item[0]), item[0])  # numeric ids of the same length sort as numbers


def qos_priority(qos: dict[str, dict[str, str]], name: str) -> int:
    value = qos.get(name, {}).get("priority", "")
    return int(value) if value.isdigit() else 0
