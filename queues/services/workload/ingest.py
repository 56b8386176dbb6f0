"""Recording workload events: batched, idempotent per event id.

``events_ingest`` takes events in any order and number. Per chunk of ``BATCH`` events it
reads the event ids already stored and the jobs concerned (two queries), replays the new
events on the jobs in time order, upserts the jobs in one statement and inserts the events in
one statement that skips ids already present (``ON CONFLICT DO NOTHING``): a million events
take a few hundred transactions, not a million, and sending the same events twice stores
them once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from governance.models import GpuFlavor, PriorityTier, Project
from queues.models import (
    Cluster,
    EventKind,
    JobState,
    WaitCategory,
    WorkloadEvent,
    WorkloadJob,
)

from .classify import KUEUE, QuotaPosition, Verdict, classify

BATCH = 5000

# The state a kind of event leaves the job in, when the event does not say.
KIND_STATES = {
    EventKind.SUBMITTED: JobState.PENDING,
    EventKind.PENDING: JobState.PENDING,
    EventKind.STARTED: JobState.RUNNING,
    EventKind.RESUMED: JobState.RUNNING,
    EventKind.SUSPENDED: JobState.SUSPENDED,
    EventKind.PREEMPTED: JobState.PREEMPTED,
    EventKind.REQUEUED: JobState.PENDING,
}
# Within the same second, the order a job's life goes through.
KIND_ORDER = {kind: n for n, kind in enumerate(EventKind)}
# Descriptive fields an event may carry; a blank value never erases a known one.
DESCRIPTIVE = ("name", "user_name", "queue", "qos", "account", "constraints")
JOB_UPDATE_FIELDS = [
    "cluster",
    "name",
    "project",
    "user_name",
    "tier",
    "queue",
    "qos",
    "account",
    "gpus",
    "flavor",
    "constraints",
    "submitted_at",
    "eligible_at",
    "pending_since",
    "started_at",
    "ended_at",
    "state",
    "exit_code",
    "reason",
    "message",
    "category",
    "clears_by_itself",
    "preemptions",
    "gpu_seconds_lost",
    "requeues",
    "waited_seconds",
    "last_event_at",
]

PositionFor = Callable[[WorkloadJob], QuotaPosition | None]


@dataclass
class JobEvent:
    """One event as a collector, the API or a trace import reports it (already validated)."""

    source: str
    event_id: str
    job_id: str
    time: datetime
    kind: EventKind
    scheduler: str = "slurm"
    state: JobState | None = None
    reason: str = ""
    message: str = ""
    cluster: Cluster | None = None
    project: Project | None = None
    tier: PriorityTier | None = None
    flavor: GpuFlavor | None = None
    gpus: int | None = None
    name: str = ""
    user_name: str = ""
    queue: str = ""
    qos: str = ""
    account: str = ""
    constraints: str = ""
    submitted_at: datetime | None = None
    eligible_at: datetime | None = None
    exit_code: str = ""
    # A category decided by the caller (e.g. a trace that carries none: left empty).
    category: WaitCategory | None = None
    # False when the source cannot tell how long the job waited (traces without start times):
    # the job's wait is then not counted, rather than made up.
    waits_known: bool = True


@dataclass
class IngestResult:
    received: int = 0
    stored: int = 0
    duplicates: int = 0
    jobs_created: int = 0
    jobs_updated: int = 0
    unclassified: int = 0
    by_category: dict[str, int] = field(default_factory=dict)

    def add(self, other: IngestResult) -> None:
        for name in ("received", "stored", "duplicates", "jobs_created", "jobs_updated"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.unclassified += other.unclassified
        for key, value in other.by_category.items():
            self.by_category[key] = self.by_category.get(key, 0) + value

    def as_dict(self) -> dict[str, object]:
        return {
            "received": self.received,
            "stored": self.stored,
            "duplicates": self.duplicates,
            "jobs_created": self.jobs_created,
            "jobs_updated": self.jobs_updated,
            "unclassified": self.unclassified,
            "by_category": dict(sorted(self.by_category.items())),
        }


def events_ingest(
    *, events: Iterable[JobEvent], position_for: PositionFor | None = None, batch: int = BATCH
) -> IngestResult:
    """Store the events and bring their jobs up to date; return what was stored."""
    result = IngestResult()
    chunk: list[JobEvent] = []
    for event in events:
        chunk.append(event)
        if len(chunk) >= batch:
            result.add(_ingest_chunk(chunk, position_for))
            chunk = []
    if chunk:
        result.add(_ingest_chunk(chunk, position_for))
    return result


def _seconds(start: datetime | None, end: datetime) -> int:
    return max(0, int((end - start).total_seconds())) if start else 0


@transaction.atomic
def _ingest_chunk(chunk: list[JobEvent], position_for: PositionFor | None) -> IngestResult:
    result = IngestResult(received=len(chunk))
    # Drop repeats inside the chunk, then the ids already stored.
    unique: dict[tuple[str, str], JobEvent] = {}
    for event in chunk:
        unique.setdefault((event.source, event.event_id), event)
    by_source: dict[str, list[JobEvent]] = defaultdict(list)
    for event in unique.values():
        by_source[event.source].append(event)
    stored: set[tuple[str, str]] = set()
    jobs: dict[tuple[str, str], WorkloadJob] = {}
    for source, items in by_source.items():
        ids = [event.event_id for event in items]
        stored.update(
            (source, eid)
            for eid in WorkloadEvent.objects.filter(source=source, event_id__in=ids).values_list(
                "event_id", flat=True
            )
        )
        job_ids = {event.job_id for event in items}
        for job in WorkloadJob.objects.filter(source=source, job_id__in=job_ids):
            jobs[(source, job.job_id)] = job
    fresh = [event for key, event in unique.items() if key not in stored]
    result.duplicates = len(chunk) - len(fresh)
    if not fresh:
        return result
    fresh.sort(key=lambda event: (event.time, KIND_ORDER[event.kind], event.event_id))
    existing = set(jobs)
    touched: dict[tuple[str, str], WorkloadJob] = {}
    event_rows: list[tuple[tuple[str, str], tuple[Any, ...]]] = []
    for event in fresh:
        key = (event.source, event.job_id)
        found = jobs.get(key)
        if found is None:
            job = WorkloadJob(
                source=event.source,
                job_id=event.job_id,
                state=JobState.PENDING,
                submitted_at=event.submitted_at or event.time,
                pending_since=event.submitted_at or event.time,
                last_event_at=event.time,
            )
            jobs[key] = job
        else:
            job = found
        verdict = _apply(job, event, position_for)
        touched[key] = job
        if verdict is not None:
            result.by_category[verdict.category] = result.by_category.get(verdict.category, 0) + 1
            result.unclassified += int(not verdict.known)
        event_rows.append(
            (
                key,
                (
                    event.source,
                    event.event_id[:200],
                    event.time,
                    str(event.kind),
                    str(event.state or KIND_STATES.get(event.kind) or job.state),
                    event.reason[:200],
                    event.message,
                    str(verdict.category) if verdict else "",
                    job.gpus,
                ),
            )
        )
    rows = list(touched.values())
    if connection.vendor == "postgresql":
        _pg_store(rows, [(touched[key], values) for key, values in event_rows])
    else:
        WorkloadJob.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["source", "job_id"],
            update_fields=JOB_UPDATE_FIELDS,
        )
        if any(job.pk is None for job in rows):  # databases that do not return upserted ids
            _fill_pks(rows)
        WorkloadEvent.objects.bulk_create(
            [
                WorkloadEvent(
                    job_id=touched[key].pk, **dict(zip(EVENT_COLUMNS, values, strict=True))
                )
                for key, values in event_rows
            ],
            ignore_conflicts=True,
        )
    result.stored = len(event_rows)
    result.jobs_created = len(set(touched) - existing)
    result.jobs_updated = len(set(touched) & existing)
    return result


EVENT_COLUMNS = (
    "source",
    "event_id",
    "time",
    "kind",
    "state",
    "reason",
    "message",
    "category",
    "gpus",
)


def _pg_store(jobs: list[WorkloadJob], events: list[tuple[WorkloadJob, tuple[Any, ...]]]) -> None:
    """PostgreSQL: ``COPY`` the jobs and events into temporary tables, then one upsert and one
    ``INSERT … ON CONFLICT DO NOTHING`` (no per-row ORM work: the ingest benchmark's path)."""
    fields: list[Any] = []
    for name in ["source", "job_id", *JOB_UPDATE_FIELDS]:
        fields.append(WorkloadJob._meta.get_field(name))
    columns: list[str] = [str(field.column) for field in fields]
    names = ", ".join(columns)
    event_names = ", ".join(("job_id", *EVENT_COLUMNS))
    updates = ", ".join(f"{column} = EXCLUDED.{column}" for column in columns[2:])
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS arbiter_job_in ON COMMIT DELETE ROWS AS "
            f"SELECT {names} FROM queues_workloadjob WITH NO DATA"
        )
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS arbiter_event_in ON COMMIT DELETE ROWS AS "
            f"SELECT {event_names} FROM queues_workloadevent WITH NO DATA"
        )
        cursor.execute("TRUNCATE arbiter_job_in, arbiter_event_in")
        with cursor.copy(f"COPY arbiter_job_in ({names}) FROM STDIN") as copy:
            for job in jobs:
                copy.write_row([getattr(job, field.attname) for field in fields])
        cursor.execute(
            f"INSERT INTO queues_workloadjob ({names}) SELECT {names} FROM arbiter_job_in "
            f"ON CONFLICT (source, job_id) DO UPDATE SET {updates} RETURNING id, source, job_id"
        )
        ids = {(source, job_id): pk for pk, source, job_id in cursor.fetchall()}
        for job in jobs:
            job.pk = ids[(job.source, job.job_id)]
        with cursor.copy(f"COPY arbiter_event_in ({event_names}) FROM STDIN") as copy:
            for job, values in events:
                copy.write_row((job.pk, *values))
        cursor.execute(
            f"INSERT INTO queues_workloadevent ({event_names}) SELECT {event_names} "
            "FROM arbiter_event_in ON CONFLICT (source, event_id) DO NOTHING"
        )


def _fill_pks(rows: list[WorkloadJob]) -> None:
    by_source: dict[str, list[WorkloadJob]] = defaultdict(list)
    for row in rows:
        by_source[row.source].append(row)
    for source, items in by_source.items():
        pks = dict(
            WorkloadJob.objects.filter(
                source=source, job_id__in=[row.job_id for row in items]
            ).values_list("job_id", "pk")
        )
        for row in items:
            row.pk = pks[row.job_id]


def _apply(job: WorkloadJob, event: JobEvent, position_for: PositionFor | None) -> Verdict | None:
    """Replay one event on the job; return the wait verdict of a pending event."""
    for name in DESCRIPTIVE:
        value = getattr(event, name)
        if value:
            setattr(job, name, value[:500] if name == "constraints" else value[:200])
    for name in ("cluster", "project", "tier", "flavor"):
        value = getattr(event, name)
        if value is not None:
            setattr(job, name, value)
    if event.gpus is not None:
        job.gpus = event.gpus
    if event.submitted_at and (job.submitted_at is None or event.submitted_at < job.submitted_at):
        job.submitted_at = event.submitted_at
    if event.eligible_at:
        job.eligible_at = event.eligible_at
    verdict = None
    if event.kind in (EventKind.SUBMITTED, EventKind.PENDING) and event.reason:
        position = position_for(job) if position_for and event.scheduler == KUEUE else None
        verdict = classify(
            scheduler=event.scheduler, reason=event.reason, message=event.message, position=position
        )
        if event.category:
            verdict = Verdict(event.category, verdict.clears_by_itself, verdict.reason)
    elif event.kind == EventKind.SUBMITTED and event.category:
        verdict = Verdict(event.category, None, "")
    if event.time < job.last_event_at:
        return verdict  # an older event, kept in the log; the job already knows better
    job.last_event_at = event.time
    was = job.state
    kind = event.kind
    if kind in (EventKind.SUBMITTED, EventKind.PENDING):
        if was not in (JobState.PENDING,) and kind == EventKind.PENDING:
            job.pending_since = event.time
        job.state = JobState.PENDING
        if job.pending_since is None:
            job.pending_since = job.submitted_at or event.time
        if verdict is not None:
            job.reason, job.message = verdict.reason or event.reason[:200], event.message
            job.category, job.clears_by_itself = verdict.category, verdict.clears_by_itself
    elif kind in (EventKind.STARTED, EventKind.RESUMED):
        if was == JobState.PENDING and event.waits_known:
            job.waited_seconds += _seconds(job.pending_since, event.time)
        if kind == EventKind.STARTED or job.started_at is None:
            job.started_at = event.time
        job.state = JobState.RUNNING
        job.pending_since = None  # reason and category stay: why it waited, last time
    elif kind == EventKind.SUSPENDED:
        job.state = JobState.SUSPENDED
    elif kind == EventKind.PREEMPTED:
        job.preemptions += 1
        if was == JobState.RUNNING:
            job.gpu_seconds_lost += job.gpus * _seconds(job.started_at, event.time)
        job.state = JobState.PREEMPTED
        job.reason, job.message = event.reason[:200], event.message
    elif kind == EventKind.REQUEUED:
        job.requeues += 1
        job.state = JobState.PENDING
        job.pending_since = event.time
    elif kind == EventKind.ENDED:
        if was == JobState.PENDING and event.waits_known:
            job.waited_seconds += _seconds(job.pending_since, event.time)
        job.state = event.state or JobState.COMPLETED
        job.ended_at = event.time
        if job.started_at and job.ended_at < job.started_at:
            job.ended_at = job.started_at
        job.pending_since = None
        job.exit_code = event.exit_code[:32]
    return verdict
