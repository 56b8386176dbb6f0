"""The values of an ingest: the events it takes (``JobEvent``), the job rows it works on
(``JobRow``), the columns it writes, and what it reports (``IngestResult``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from governance.models import GpuFlavor, Pool, PriorityTier, Project
from queues.models import (
    FINISHED_STATES,
    Cluster,
    EventKind,
    JobState,
    WaitCategory,
)
from queues.schedulers.classify import QuotaPosition

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
