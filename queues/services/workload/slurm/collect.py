"""``collect_cluster``: one collection of a Slurm cluster's jobs, under a lease so that two
collectors never read the same cluster at once."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from queues.models import (
    Cluster,
    CollectorState,
    WorkloadJob,
)
from queues.schedulers.backends import SchedulerError

from ...slurm import SlurmCommands, commands_for
from ..ingest import events_ingest
from .events import sacct_events, squeue_events
from .values import (
    FINAL,
    FIRST_LOOKBACK,
    LEASE,
    OVERLAP,
    RUNNING_LIKE,
    SACCT_COUNT,
    SACCT_FIELDS,
    SQUEUE_FIELDS,
    SQUEUE_FORMAT,
    CollectorBusy,
    CollectResult,
    JobKeys,
    Names,
)


def _lease(cluster: Cluster, now: datetime) -> str:
    with transaction.atomic():
        CollectorState.objects.get_or_create(cluster=cluster)
        state = CollectorState.objects.select_for_update().get(cluster=cluster)
        if state.lease_token and state.lease_expires_at and state.lease_expires_at > now:
            raise CollectorBusy(str(cluster))
        state.lease_token = uuid.uuid4().hex
        state.lease_expires_at = now + LEASE
        state.last_attempt_at = now
        state.save(update_fields=["lease_token", "lease_expires_at", "last_attempt_at"])
        return state.lease_token


def _finish(cluster: Cluster, token: str, **values: object) -> CollectorState:
    with transaction.atomic():
        state = CollectorState.objects.select_for_update().get(cluster=cluster)
        if state.lease_token == token:
            state.lease_token, state.lease_expires_at = "", None
        for name, value in values.items():
            setattr(state, name, value)
        state.save()
        return state


def collect_cluster(
    *, cluster: Cluster, commands: SlurmCommands | None = None, now: datetime | None = None
) -> CollectResult:
    """Read the cluster's queue and accounting once and record what changed.

    Raises ``CollectorBusy`` when another collection of the cluster holds the lease; a
    scheduler that does not answer gives ``ok=False`` with the error (and is retried by the
    next periodic run), never an exception.
    """
    now = now or timezone.now()
    token = _lease(cluster, now)
    commands = commands or commands_for(cluster)
    state = CollectorState.objects.get(cluster=cluster)
    since = (state.watermark or now - FIRST_LOOKBACK) - OVERLAP
    source = cluster.name
    try:
        queue_rows, sacct_rows = _read(commands, since)
    except SchedulerError as error:
        _finish(
            cluster,
            token,
            last_error=str(error)[:2000],
            failures=state.failures + 1,
        )
        return CollectResult(cluster=source, ok=False, error=str(error))
    names = Names.for_cluster(cluster)
    ids = [row[0] for row in queue_rows]
    stored = list(
        WorkloadJob.objects.filter(
            source=source, job_id__in={*ids, *(row[0] for row in sacct_rows)}
        ).only("pk", "key", "job_id", "submitted_at", "state", "reason")
    )
    keys = JobKeys(stored)
    # Accounting first: it tells a requeued job (same job) from a reused id (a new job).
    events = sacct_events(
        sacct_rows, source=source, cluster=cluster, names=names, active=set(ids), keys=keys
    )
    events += squeue_events(
        queue_rows,
        source=source,
        cluster=cluster,
        names=names,
        known={job.key: job for job in stored},
        now=now,
        keys=keys,
    )
    ingest = events_ingest(events=events)
    result = CollectResult(
        cluster=source,
        ok=True,
        pending=sum(1 for row in queue_rows if row[1] == "PENDING"),
        running=sum(1 for row in queue_rows if row[1] in RUNNING_LIKE),
        finished=sum(1 for row in sacct_rows if row[1].split()[0] in FINAL) if sacct_rows else 0,
        ingest=ingest,
    )
    _finish(
        cluster,
        token,
        watermark=now,
        last_success_at=now,
        last_error="",
        failures=0,
        last_counts=result.as_dict(),
    )
    return result


def _read(commands: SlurmCommands, since: datetime) -> tuple[list[list[str]], list[list[str]]]:
    """The queue's jobs still in play (``squeue``) and the accounting since ``since``
    (``sacct``), as rows of fields; ``SchedulerError`` when the scheduler does not answer."""
    queue = commands.run(["squeue", "-h", "-a", "-t", "all", "-o", SQUEUE_FORMAT])
    accounting = commands.run(
        [
            "sacct",
            "-a",
            "-X",
            "-D",
            "-P",
            "-n",
            "-S",
            since.astimezone().strftime("%Y-%m-%dT%H:%M:%S"),
            "-E",
            "now",
            f"--format={SACCT_FIELDS}",
        ]
    )
    queue_rows = [
        line.split("|", SQUEUE_FIELDS - 1)
        for line in queue.splitlines()
        if line.count("|") >= SQUEUE_FIELDS - 1
    ]
    queue_rows = [
        row
        for row in queue_rows
        if row[1] == "PENDING" or row[1] in RUNNING_LIKE or row[1] == "SUSPENDED"
    ]
    sacct_rows = [
        line.split("|", SACCT_COUNT - 1)
        for line in accounting.splitlines()
        if line.count("|") >= SACCT_COUNT - 1
    ]
    return queue_rows, sacct_rows
