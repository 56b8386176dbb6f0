"""Recording workload events: batched, set-based, idempotent per event id.

``events_ingest`` takes events in any order and number and works per chunk of ``BATCH``
events, in one transaction per chunk (a million events take a few hundred transactions):

1. two reads: the event ids of the chunk already stored, and the jobs the chunk concerns
   (on PostgreSQL with one array parameter each, ``= ANY(%s)``);
2. one pass in Python over the new events in time order, on plain rows (no model instances,
   no query per event): each job's new state, and each event's row;
3. two writes: the jobs upserted in one statement, the events inserted in one statement that
   skips ids already present (``ON CONFLICT DO NOTHING``, so two ingests racing on the same
   events store them once). On PostgreSQL both go through ``COPY`` into temporary tables.

A job is identified by ``(source, key)``; ``key`` is the scheduler's job id unless the
caller says otherwise (the Slurm collector appends the submit time, since Slurm reuses job
ids after its state is reset). An event that contradicts what is known of its job (a start
after the job ended, a time without a zone, an unknown kind) is rejected and counted in
``rejected``, with its error: bad input never stops the batch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DataError, IntegrityError, connection, transaction
from django.utils.translation import gettext as _

from governance.models import GpuFlavor, Pool, PriorityTier, Project
from queues.models import (
    FINISHED_STATES,
    Cluster,
    EventKind,
    JobState,
    WaitCategory,
    WorkloadEvent,
    WorkloadJob,
)
from queues.schedulers.classify import KUEUE, QuotaPosition, Verdict, classify

BATCH = 5000
MAX_ERRORS = 50  # error details kept per ingest (all are counted)

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
FINISHED = frozenset(FINISHED_STATES)
# The job columns the ingest writes, as attribute names (``project_id``...) in table order.
JOB_FIELDS = (
    "cluster_id",
    "name",
    "project_id",
    "user_name",
    "tier_id",
    "queue",
    "qos",
    "account",
    "gpus",
    "flavor_id",
    "pool_id",
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
    "waits_recorded",
    "last_event_at",
)
IDENTITY = ("source", "key", "job_id")
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


class JobRow:
    """A job's state while a chunk is replayed: a plain row, cheaper than a model instance.

    Has the attribute names of ``WorkloadJob`` (``project_id``, ``flavor_id``, ``gpus``...),
    so a ``PositionFor`` reads either."""

    __slots__ = ("pk", *IDENTITY, *JOB_FIELDS)

    pk: int | None
    source: str
    key: str
    job_id: str
    cluster_id: int | None
    name: str
    project_id: int | None
    user_name: str
    tier_id: int | None
    queue: str
    qos: str
    account: str
    gpus: float
    flavor_id: int | None
    pool_id: int | None
    constraints: str
    submitted_at: datetime | None
    eligible_at: datetime | None
    pending_since: datetime | None
    started_at: datetime | None
    ended_at: datetime | None
    state: str
    exit_code: str
    reason: str
    message: str
    category: str
    clears_by_itself: bool | None
    preemptions: int
    gpu_seconds_lost: int
    requeues: int
    waits_recorded: bool
    last_event_at: datetime

    @classmethod
    def new(cls, *, source: str, key: str, job_id: str, at: datetime) -> JobRow:
        row = cls()
        row.pk, row.source, row.key, row.job_id = None, source, key, job_id
        for name in ("cluster_id", "project_id", "tier_id", "flavor_id", "pool_id", "eligible_at"):
            setattr(row, name, None)
        for name in ("started_at", "ended_at", "clears_by_itself"):
            setattr(row, name, None)
        for name in (*DESCRIPTIVE, "exit_code", "reason", "message", "category"):
            setattr(row, name, "")
        for name in ("gpus", "preemptions", "gpu_seconds_lost", "requeues"):
            setattr(row, name, 0)
        row.state = JobState.PENDING
        row.waits_recorded = True
        row.submitted_at = row.pending_since = row.last_event_at = at
        return row

    @classmethod
    def stored(cls, values: Iterable[Any]) -> JobRow:
        """From the values of ``("pk", *IDENTITY, *JOB_FIELDS)``, as read from the table."""
        row = cls()
        for name, value in zip(cls.__slots__, values, strict=True):
            setattr(row, name, value)
        return row

    def values(self) -> list[Any]:
        return [getattr(self, name) for name in (*IDENTITY, *JOB_FIELDS)]


PositionFor = Callable[[Any], QuotaPosition | None]


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
    # The pool, when the source names it (a trace's --pool-map); else derived (definitions).
    pool: Pool | None = None
    # Fractions of a GPU are kept (a share of one GPU: 0.25).
    gpus: float | None = None
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
    # The job's identity within its source when the scheduler's id is not enough (Slurm
    # reuses ids): ``<id>@<submit epoch>``. Empty: the job id.
    job_key: str = ""


@dataclass
class IngestResult:
    received: int = 0
    stored: int = 0
    duplicates: int = 0
    rejected: int = 0
    jobs_created: int = 0
    jobs_updated: int = 0
    unclassified: int = 0
    by_category: dict[str, int] = field(default_factory=dict)
    errors: list[dict[str, str]] = field(default_factory=list)

    def add(self, other: IngestResult) -> None:
        for name in (
            "received",
            "stored",
            "duplicates",
            "rejected",
            "jobs_created",
            "jobs_updated",
            "unclassified",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for key, value in other.by_category.items():
            self.by_category[key] = self.by_category.get(key, 0) + value
        self.errors.extend(other.errors[: max(0, MAX_ERRORS - len(self.errors))])

    def reject(self, event: JobEvent, error: str) -> None:
        self.rejected += 1
        if len(self.errors) < MAX_ERRORS:
            source, event_id = getattr(event, "source", ""), getattr(event, "event_id", "")
            self.errors.append({"source": str(source), "event_id": str(event_id), "error": error})

    def as_dict(self) -> dict[str, object]:
        return {
            "received": self.received,
            "stored": self.stored,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "jobs_created": self.jobs_created,
            "jobs_updated": self.jobs_updated,
            "unclassified": self.unclassified,
            "by_category": dict(sorted(self.by_category.items())),
            "errors": list(self.errors),
        }


class Contradiction(Exception):
    """An event that cannot be true of its job as known (or is malformed)."""


def events_ingest(
    *, events: Iterable[JobEvent], position_for: PositionFor | None = None, batch: int = BATCH
) -> IngestResult:
    """Store the events and bring their jobs up to date; return what was stored.

    Never raises on bad events: each is rejected and counted. Should the database still
    refuse a chunk, its events are retried one by one and only the refused ones rejected.
    """
    result = IngestResult()
    chunk: list[JobEvent] = []
    for event in events:
        chunk.append(event)
        if len(chunk) >= batch:
            result.add(_ingest_safely(chunk, position_for))
            chunk = []
    if chunk:
        result.add(_ingest_safely(chunk, position_for))
    return result


def _ingest_safely(chunk: list[JobEvent], position_for: PositionFor | None) -> IngestResult:
    for _attempt in range(2):  # the second sees what a concurrent ingest stored meanwhile
        try:
            return _ingest_chunk(chunk, position_for)
        except (IntegrityError, DataError):
            pass
    result = IngestResult()
    for event in chunk:  # only when the database refuses the chunk twice: find the culprits
        try:
            result.add(_ingest_chunk([event], position_for))
        except (IntegrityError, DataError) as error:
            result.received += 1
            result.reject(event, str(error).splitlines()[0][:300])
    return result


def _seconds(start: datetime | None, end: datetime) -> int:
    return max(0, int((end - start).total_seconds())) if start else 0


def _malformed(event: JobEvent) -> str:
    """Why an event cannot be replayed at all, or ``""``."""
    if not (event.source and event.event_id and event.job_id):
        return _("An event needs a source, an event id and a job id.")
    if event.kind not in KIND_ORDER:
        return _("Unknown event kind “%(kind)s”.") % {"kind": event.kind}
    for moment in (event.time, event.submitted_at, event.eligible_at):
        if moment is not None and (not isinstance(moment, datetime) or moment.tzinfo is None):
            return _("Times need a time zone.")
    if event.gpus is not None and event.gpus < 0:
        return _("GPUs cannot be negative.")
    return ""


@transaction.atomic
def _ingest_chunk(chunk: list[JobEvent], position_for: PositionFor | None) -> IngestResult:
    result = IngestResult(received=len(chunk))
    # Drop malformed events and repeats inside the chunk, then the ids already stored.
    unique: dict[tuple[str, str], JobEvent] = {}
    well_formed = 0
    for event in chunk:
        problem = _malformed(event)
        if problem:
            result.reject(event, problem)
            continue
        well_formed += 1
        unique.setdefault((event.source, event.event_id), event)
    by_source: dict[str, list[JobEvent]] = defaultdict(list)
    for event in unique.values():
        by_source[event.source].append(event)
    stored: set[tuple[str, str]] = set()
    jobs: dict[tuple[str, str], JobRow] = {}
    for source, items in by_source.items():
        keys = list({event.job_key or event.job_id for event in items})
        for row in _stored_jobs(source, keys):
            jobs[(source, row.key)] = row
        # Only the events of stored jobs can be stored already (every event has its job).
        ids = [event.event_id for event in items if (source, event.job_key or event.job_id) in jobs]
        if ids:
            stored.update((source, event_id) for event_id in _stored_event_ids(source, ids))
    fresh = [event for key, event in unique.items() if key not in stored]
    # Repeats inside the batch and ids stored before alike: received = stored + duplicates
    # + rejected.
    result.duplicates = well_formed - len(fresh)
    if not fresh:
        return result
    fresh.sort(key=lambda event: (event.time, KIND_ORDER[event.kind], event.event_id))
    existing = set(jobs)
    touched: dict[tuple[str, str], JobRow] = {}
    event_rows: list[tuple[JobRow, tuple[Any, ...]]] = []
    verdicts: dict[tuple[str, str, str], Verdict] = {}
    for event in fresh:
        key = (event.source, event.job_key or event.job_id)
        job = jobs.get(key)
        if job is None:
            at = event.submitted_at or event.time
            job = JobRow.new(source=key[0], key=key[1], job_id=event.job_id, at=at)
        try:
            verdict = _apply(job, event, position_for, verdicts)
        except Contradiction as why:
            result.reject(event, str(why))
            continue
        jobs[key] = touched[key] = job
        if verdict is not None:
            result.by_category[verdict.category] = result.by_category.get(verdict.category, 0) + 1
            result.unclassified += int(not verdict.known)
        event_rows.append(
            (
                job,
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
        _pg_store(rows, event_rows)
    else:
        _orm_store(rows, event_rows)
    result.stored = len(event_rows)
    result.jobs_created = len(set(touched) - existing)
    result.jobs_updated = len(set(touched) & existing)
    return result


def _stored_event_ids(source: str, ids: list[str]) -> list[str]:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT event_id FROM queues_workloadevent "
                "WHERE source = %s AND event_id = ANY(%s::varchar[])",
                [source, ids],
            )
            return [row[0] for row in cursor.fetchall()]
    return list(
        WorkloadEvent.objects.filter(source=source, event_id__in=ids).values_list(
            "event_id", flat=True
        )
    )


def _stored_jobs(source: str, keys: list[str]) -> list[JobRow]:
    names = ("pk", *IDENTITY, *JOB_FIELDS)
    if connection.vendor == "postgresql":
        columns = ", ".join("id" if name == "pk" else name for name in names)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {columns} FROM queues_workloadjob "
                "WHERE source = %s AND key = ANY(%s::varchar[])",
                [source, keys],
            )
            return [JobRow.stored(values) for values in cursor.fetchall()]
    rows = WorkloadJob.objects.filter(source=source, key__in=keys).values_list(*names)
    return [JobRow.stored(values) for values in rows]


def _pg_store(jobs: list[JobRow], events: list[tuple[JobRow, tuple[Any, ...]]]) -> None:
    """PostgreSQL: new jobs get their ids from the sequence and are ``COPY``-ed in; known jobs
    are ``COPY``-ed into a temporary table and updated in one statement; the events are
    ``COPY``-ed in. No per-row SQL. The reads before made sure no id is stored yet; should a
    concurrent ingest store one meanwhile, the unique constraint refuses the chunk and
    ``events_ingest`` runs it again (it then sees the other's rows)."""
    names = ", ".join((*IDENTITY, *JOB_FIELDS))
    new = [job for job in jobs if job.pk is None]
    known = [job for job in jobs if job.pk is not None]
    with connection.cursor() as cursor:
        if new:
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence('queues_workloadjob', 'id')) "
                "FROM generate_series(1, %s)",
                [len(new)],
            )
            for job, (pk,) in zip(new, cursor.fetchall(), strict=True):
                job.pk = pk
            with cursor.copy(f"COPY queues_workloadjob (id, {names}) FROM STDIN") as copy:
                for job in new:
                    copy.write_row([job.pk, *job.values()])
        if known:
            cursor.execute(
                "CREATE TEMP TABLE IF NOT EXISTS arbiter_job_in ON COMMIT DELETE ROWS AS "
                f"SELECT id, {names} FROM queues_workloadjob WITH NO DATA"
            )
            cursor.execute("TRUNCATE arbiter_job_in")
            with cursor.copy(f"COPY arbiter_job_in (id, {names}) FROM STDIN") as copy:
                for job in known:
                    copy.write_row([job.pk, *job.values()])
            updates = ", ".join(f"{column} = t.{column}" for column in ("job_id", *JOB_FIELDS))
            cursor.execute(
                f"UPDATE queues_workloadjob AS j SET {updates} "
                "FROM arbiter_job_in AS t WHERE j.id = t.id"
            )
        event_names = ", ".join(("job_id", *EVENT_COLUMNS))
        with cursor.copy(f"COPY queues_workloadevent ({event_names}) FROM STDIN") as copy:
            for job, values in events:
                copy.write_row((job.pk, *values))


def _orm_store(jobs: list[JobRow], events: list[tuple[JobRow, tuple[Any, ...]]]) -> None:
    """Other databases (SQLite in development and tests): the same two writes through the ORM."""
    names = (*IDENTITY, *JOB_FIELDS)
    models = [WorkloadJob(**dict(zip(names, job.values(), strict=True))) for job in jobs]
    WorkloadJob.objects.bulk_create(
        models,
        update_conflicts=True,
        unique_fields=["source", "key"],
        update_fields=["job_id", *(name.removesuffix("_id") for name in JOB_FIELDS)],
    )
    by_source: dict[str, list[JobRow]] = defaultdict(list)
    for job in jobs:
        by_source[job.source].append(job)
    for source, items in by_source.items():  # SQLite does not return upserted ids
        pks = dict(
            WorkloadJob.objects.filter(source=source, key__in=[job.key for job in items])
            .values_list("key", "pk")
            .iterator()
        )
        for job in items:
            job.pk = pks[job.key]
    WorkloadEvent.objects.bulk_create(
        [
            WorkloadEvent(job_id=job.pk or 0, **dict(zip(EVENT_COLUMNS, values, strict=True)))
            for job, values in events
        ],
        ignore_conflicts=True,
    )


def _verdict(
    event: JobEvent,
    job: JobRow,
    position_for: PositionFor | None,
    verdicts: dict[tuple[str, str, str], Verdict],
) -> Verdict:
    if position_for and event.scheduler == KUEUE:  # depends on the project's position
        position = position_for(job)
        return classify(
            scheduler=event.scheduler, reason=event.reason, message=event.message, position=position
        )
    memo = (event.scheduler, event.reason, event.message)
    verdict = verdicts.get(memo)
    if verdict is None:
        verdict = verdicts[memo] = classify(
            scheduler=event.scheduler, reason=event.reason, message=event.message
        )
    return verdict


def _apply(
    job: JobRow,
    event: JobEvent,
    position_for: PositionFor | None,
    verdicts: dict[tuple[str, str, str], Verdict],
) -> Verdict | None:
    """Replay one event on the job; return the wait verdict of a pending event.

    Raises ``Contradiction`` (before changing anything) when the event cannot be true of
    the job as known: a start after the job ended, for instance a reused scheduler job id."""
    kind = event.kind
    current = event.time >= job.last_event_at
    if current and _late_submit(job, event):
        current = False  # the ended job's own submit, reported late: a fact, not a reopening
    if current:
        _refuse_contradiction(job, event)
    _record_facts(job, event)
    verdict = None
    if kind in (EventKind.SUBMITTED, EventKind.PENDING) and event.reason:
        verdict = _verdict(event, job, position_for, verdicts)
        if event.category:
            verdict = Verdict(event.category, verdict.clears_by_itself, verdict.reason)
    elif kind == EventKind.SUBMITTED and event.category:
        verdict = Verdict(event.category, None, "")
    if not current:
        return verdict  # an older event, kept in the log; the job already knows better
    _advance(job, event, verdict)
    return verdict


def _ended(job: JobRow) -> bool:
    return job.state in FINISHED and job.ended_at is not None


def _late_submit(job: JobRow, event: JobEvent) -> bool:
    """A ``submitted`` event of an ended job at (or before) its known submit: the job's own
    submission, reported after its end (a job cancelled the instant it was submitted)."""
    return (
        event.kind == EventKind.SUBMITTED
        and _ended(job)
        and job.submitted_at is not None
        and event.time <= job.submitted_at
    )


def _refuse_contradiction(job: JobRow, event: JobEvent) -> None:
    """Raise ``Contradiction`` when the (current) event would change an ended job: nothing at
    or after a job's end reopens or relabels it, whatever its kind (a start, a wait, a
    requeue, a suspension or preemption, another end). Only a repeat of the end itself (the
    same instant and state, under another id) passes, and changes nothing."""
    if not _ended(job) or job.ended_at is None or event.time < job.ended_at:
        return
    end = job.ended_at.isoformat()
    names = {"job": job.job_id, "state": JobState(job.state).label, "end": end}
    kind = event.kind
    if kind == EventKind.ENDED:
        if event.time == job.ended_at and (event.state or JobState.COMPLETED) == job.state:
            return
        raise Contradiction(
            _(
                "Job %(job)s had already ended (%(state)s at %(end)s): a second end cannot "
                "relabel it."
            )
            % names
        )
    if kind in (EventKind.STARTED, EventKind.RESUMED):
        raise Contradiction(
            _("Job %(job)s started after it had ended: a different job with the same id?") % names
        )
    if kind in (EventKind.SUBMITTED, EventKind.PENDING):
        raise Contradiction(
            _("Job %(job)s was reported waiting after it had ended: it cannot reopen.") % names
        )
    if kind == EventKind.REQUEUED:
        raise Contradiction(
            _("Job %(job)s was reported requeued after it had ended: it cannot reopen.") % names
        )
    raise Contradiction(
        _(
            "Job %(job)s was reported %(kind)s after it had ended (%(state)s at %(end)s): an "
            "ended job keeps its end."
        )
        % {**names, "kind": EventKind(kind).label.lower()}
    )


def _record_facts(job: JobRow, event: JobEvent) -> None:
    """What the event tells of the job itself (names, project, GPUs, times), whatever its age."""
    if not event.waits_known:
        job.waits_recorded = False  # the source cannot tell this job's wait
    for name in DESCRIPTIVE:
        value = getattr(event, name)
        if value:
            setattr(job, name, value[:500] if name == "constraints" else value[:200])
    if event.cluster is not None:
        job.cluster_id = event.cluster.pk
    if event.project is not None:
        job.project_id = event.project.pk
    if event.tier is not None:
        job.tier_id = event.tier.pk
    if event.flavor is not None:
        job.flavor_id = event.flavor.pk
    if event.pool is not None:
        job.pool_id = event.pool.pk
    if event.gpus is not None:
        job.gpus = event.gpus
    if event.submitted_at and (job.submitted_at is None or event.submitted_at < job.submitted_at):
        job.submitted_at = event.submitted_at
    if event.eligible_at:
        job.eligible_at = event.eligible_at


def _advance(job: JobRow, event: JobEvent, verdict: Verdict | None) -> None:
    """Move the job to the state a current event reports, with its waits and losses."""
    kind = event.kind
    job.last_event_at = event.time
    was = job.state
    if kind in (EventKind.SUBMITTED, EventKind.PENDING):
        if was != JobState.PENDING and kind == EventKind.PENDING:
            job.pending_since = event.time
        job.state = JobState.PENDING
        if job.pending_since is None:
            job.pending_since = job.submitted_at or event.time
        if verdict is not None:
            job.reason, job.message = verdict.reason or event.reason[:200], event.message
            job.category, job.clears_by_itself = verdict.category, verdict.clears_by_itself
    elif kind in (EventKind.STARTED, EventKind.RESUMED):
        if kind == EventKind.STARTED or job.started_at is None:
            job.started_at = event.time
        job.state = JobState.RUNNING
        job.pending_since = None  # reason and category stay: why it waited, last time
    elif kind == EventKind.SUSPENDED:
        job.state = JobState.SUSPENDED
    elif kind == EventKind.PREEMPTED:
        job.preemptions += 1
        if was == JobState.RUNNING:
            job.gpu_seconds_lost += round(job.gpus * _seconds(job.started_at, event.time))
        job.state = JobState.PREEMPTED
        job.reason, job.message = event.reason[:200], event.message
    elif kind == EventKind.REQUEUED:
        job.requeues += 1
        job.state = JobState.PENDING
        job.pending_since = event.time
        job.ended_at, job.exit_code = None, ""  # the run ended, the job did not
    elif kind == EventKind.ENDED:
        job.state = event.state or JobState.COMPLETED
        job.ended_at = event.time
        if job.started_at and job.ended_at < job.started_at:
            job.ended_at = job.started_at
        job.pending_since = None
        job.exit_code = event.exit_code[:32]
