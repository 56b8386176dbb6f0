"""squeue's and sacct's lines as workload events (``squeue_events``, ``sacct_events``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from queues.models import (
    Cluster,
    EventKind,
    JobState,
    WorkloadJob,
)
from queues.schedulers.classify import slurm_reason_token

from ..ingest import JobEvent
from .values import FINAL, RUNNING_LIKE, JobKeys, Names, _epoch, _null, slurm_time


def _job_fields(
    source: str,
    cluster: Cluster,
    names: Names,
    job_id: str,
    account: str,
    qos: str,
    user: str,
    partition: str,
    constraints: str,
    name: str,
    gres: str,
    nodes: str,
) -> dict[str, Any]:
    """What a squeue or sacct row says of its job, with project, tier and flavor mapped."""
    return {
        "source": source,
        "job_id": job_id,
        "scheduler": "slurm",
        "cluster": cluster,
        "account": account,
        "qos": qos,
        "user_name": user,
        "queue": partition,
        "constraints": _null(constraints),
        "name": name,
        **names.describe(account=account, qos=qos, gres=gres, nodes=nodes),
    }


def squeue_events(
    rows: Iterable[list[str]],
    *,
    source: str,
    cluster: Cluster,
    names: Names,
    known: dict[str, WorkloadJob],
    now: datetime,
    keys: JobKeys | None = None,
) -> list[JobEvent]:
    """Events of the queue's pending, running and suspended jobs (``known``: stored jobs by
    key, to record a pending reason only when it changed)."""
    keys = keys or JobKeys(known.values())
    # Slurm prints whole seconds: an observation at 10:00:00.4 must not come after a start
    # that Slurm prints as 10:00:00, or the start would look older than the wait it ends.
    now = now.replace(microsecond=0)
    events = []
    for row in rows:
        job_id, state, reason, account, qos, user, partition, gres, nodes, features = row[:10]
        submit, start, name = slurm_time(row[10]), slurm_time(row[11]), row[12]
        submit = submit or now
        common = _job_fields(
            source,
            cluster,
            names,
            job_id,
            account,
            qos,
            user,
            partition,
            features,
            name,
            gres,
            nodes,
        )
        key = keys.key(job_id, submit)
        common.update(submitted_at=submit, job_key=key)
        stored = known.get(key)
        events.append(
            JobEvent(event_id=f"{key}:submit", time=submit, kind=EventKind.SUBMITTED, **common)
        )
        if state == "PENDING":
            token = slurm_reason_token(reason)
            if stored is None or stored.state != JobState.PENDING or stored.reason != token:
                events.append(
                    JobEvent(
                        event_id=f"{key}:pending:{token}:{_epoch(now)}",
                        time=max(now, submit),
                        kind=EventKind.PENDING,
                        reason=reason,
                        **common,
                    )
                )
        elif state in RUNNING_LIKE and start is not None:
            events.append(
                JobEvent(
                    event_id=f"{key}:start:{_epoch(start)}",
                    time=start,
                    kind=EventKind.STARTED,
                    **common,
                )
            )
        elif state == "SUSPENDED" and (stored is None or stored.state != JobState.SUSPENDED):
            events.append(
                JobEvent(
                    event_id=f"{key}:suspend:{_epoch(now)}",
                    time=now,
                    kind=EventKind.SUSPENDED,
                    **common,
                )
            )
    return events


def sacct_events(
    rows: list[list[str]],
    *,
    source: str,
    cluster: Cluster,
    names: Names,
    active: set[str],
    keys: JobKeys | None = None,
) -> list[JobEvent]:
    """Events of finished jobs and of each earlier run of requeued jobs (``sacct -D``)."""
    keys = keys or JobKeys([])
    seen: dict[str, int] = {}
    for row in rows:
        seen[row[0]] = seen.get(row[0], 0) + 1
    runs: dict[str, int] = {}
    events = []
    for row in rows:
        job_id, state_text, reason, account, qos, user, partition, tres, constraints = row[:9]
        submit, eligible, start, end = (slurm_time(value) for value in row[9:13])
        exit_code, nodes, name = row[13], row[14], row[15]
        state = state_text.split()[0] if state_text.strip() else ""
        runs[job_id] = runs.get(job_id, 0) + 1
        later_run = runs[job_id] < seen[job_id] or job_id in active
        if submit is None:
            continue
        key = keys.key(job_id, submit)
        if state in ("PENDING", "RUNNING", "REQUEUED") and end is None:
            continue
        common = _job_fields(
            source,
            cluster,
            names,
            job_id,
            account,
            qos,
            user,
            partition,
            constraints,
            name,
            tres,
            nodes,
        )
        common.update(submitted_at=submit, eligible_at=eligible, job_key=key)
        events.append(
            JobEvent(event_id=f"{key}:submit", time=submit, kind=EventKind.SUBMITTED, **common)
        )
        if start is None and _null(reason) and end is not None:
            # Gave up (or was cancelled) while pending: the reason it last waited for.
            events.append(
                JobEvent(
                    event_id=f"{key}:pending:{slurm_reason_token(reason)}:sacct",
                    time=submit,
                    kind=EventKind.PENDING,
                    reason=reason,
                    **common,
                )
            )
        if start is not None:
            events.append(
                JobEvent(
                    event_id=f"{key}:start:{_epoch(start)}",
                    time=start,
                    kind=EventKind.STARTED,
                    **common,
                )
            )
        if end is None:
            continue
        events += _end_events(
            keys, job_id, key, state, end, later_run=later_run, exit_code=exit_code, common=common
        )
    return events


def _end_events(
    keys: JobKeys,
    job_id: str,
    key: str,
    state: str,
    end: datetime,
    *,
    later_run: bool,
    exit_code: str,
    common: dict[str, Any],
) -> list[JobEvent]:
    """How a run ended: preempted, requeued (the job runs again) or finished for good."""
    events: list[JobEvent] = []
    if state == "PREEMPTED":
        events.append(
            JobEvent(
                event_id=f"{key}:preempted:{_epoch(end)}",
                time=end,
                kind=EventKind.PREEMPTED,
                reason="Preempted",
                **common,
            )
        )
    if state == "REQUEUED" or (state in ("PREEMPTED", "NODE_FAIL") and later_run):
        keys.reopen(job_id, key)
        events.append(
            JobEvent(
                event_id=f"{key}:requeue:{_epoch(end)}",
                time=end,
                kind=EventKind.REQUEUED,
                reason=state,
                **common,
            )
        )
    elif state in FINAL or (state == "PREEMPTED" and not later_run):
        if state not in ("PREEMPTED", "NODE_FAIL") or not later_run:
            keys.close(job_id, key)
        events.append(
            JobEvent(
                event_id=f"{key}:end:{_epoch(end)}",
                time=end,
                kind=EventKind.ENDED,
                state=FINAL.get(state, JobState.PREEMPTED),
                exit_code=exit_code,
                **common,
            )
        )
    return events
