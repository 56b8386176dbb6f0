"""Importing public GPU-cluster traces as workload events (through the same ingest path).

What each format gives and what it cannot:

* ``alibaba-openb`` (Alibaba GPU v2023, openb pod list): per pod the creation, scheduled and
  deletion times (seconds from the trace start), GPUs (``num_gpu`` × ``gpu_milli`` / 1000: a
  pod sharing one GPU, ``gpu_milli`` below 1000, asks for a fraction of it, kept) and a
  QoS class (LS, BE, Burstable, Guaranteed) that maps onto tiers. The wait is
  ``scheduled_time − creation_time``; pods still pending at the end have none. No project,
  user or pending reason.
* ``alibaba-v2025`` (disaggregated DLRM inference instances): creation, scheduled and
  deletion times where they fall in the 31-day window; ``app_name`` maps onto projects; all
  instances are latency-sensitive (tier key ``LS``). Instances that existed before the window
  have no wait (not counted). No pending reason.
* ``philly`` (Microsoft Philly via Pollux): submit time, run time and GPUs per job, and the
  virtual cluster (maps onto projects). **No start time: no wait can be derived**; a job is
  recorded as submitted, started at its submit (the earliest it can have run: its GPU-hours
  are the file's, GPUs × run time) and ended at submit + run time (a lower bound of its end).
* ``itp`` (Microsoft ITP via ElasticFlow): the same as Philly, with the cluster as the key and
  submit times in seconds from the collection start. No wait can be derived.

No format carries pending reasons, so imported jobs have no wait category.

**The trace's end.** An Alibaba job (openb pod, v2025 instance) without a deletion time was
still running, or still waiting, when the trace ended. It is closed at the trace's end (the
latest time in the file, or ``--end``) with the state ``censored`` (an ``ended`` event in its
log): its true end is unknown, it runs no GPU-second after the trace, and as a finished job
it leaves the set the rollup rereads on every run. One still waiting then keeps its wait up
to that end, counted as *still waiting*, not as never started. A time after ``--end`` is an
error. Philly and ITP jobs all have an end (submit + run time).

**Maps.** A trace names no Arbiter project, tier, pool or flavor; the maps give them, keyed by
``row_keys`` (docs/definitions.md has the table). ``trace_import`` reads the whole file
before it writes and says (``on_scanned``) how many jobs each map leaves out, under which
keys; it refuses them unless ``allow_unmapped``. A re-import stores no event twice and brings
the stored jobs to the maps given now (``_remap``), for the next rollup to move their hours.

Enforced, not only said: a job whose source cannot tell its wait (Philly and ITP jobs, and
v2025 instances that existed before the window) is stored with ``waits_recorded`` false, so
it has no wait anywhere (``queues.selectors.definitions.job_wait``; the review counts none).
An event after a job's end cannot reopen it: the ingest rejects and lists it.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.db import transaction

from governance.models import GpuFlavor, Pool, PriorityTier, Project
from queues.models import EventKind, JobState, WorkloadJob, WorkloadJobRollup
from queues.selectors.definitions import pool_maps

from .ingest import IngestResult, JobEvent, events_ingest

FORMATS = ("alibaba-openb", "alibaba-v2025", "philly", "itp")
COLUMNS = {
    "alibaba-openb": {"name", "num_gpu", "gpu_milli", "qos", "pod_phase", "creation_time"},
    "alibaba-v2025": {"instance_sn", "app_name", "gpu_request", "creation_time"},
    "philly": {"timestamp", "duration", "num_gpus", "cluster"},
    "itp": {"cluster", "job_id", "submission_time", "duration", "num_gpu"},
}
DEFAULT = "*"


class TraceError(Exception):
    """The file cannot be read as the format says (the message says where)."""


DIMENSIONS = ("project", "tier", "pool", "flavor")


class TraceUnmapped(TraceError):
    """Jobs the maps do not cover, refused unless the import allows them (``summary`` says
    which and how many)."""

    def __init__(self, summary: TraceSummary) -> None:
        super().__init__("jobs the maps do not cover")
        self.summary = summary


@dataclass
class TraceMapping:
    """The trace's keys onto Arbiter's objects, per dimension; ``*`` is the default."""

    projects: dict[str, Project] = field(default_factory=dict)
    tiers: dict[str, PriorityTier] = field(default_factory=dict)
    pools: dict[str, Pool] = field(default_factory=dict)
    flavors: dict[str, GpuFlavor] = field(default_factory=dict)

    def find(self, dimension: str, key: str) -> Any:
        table: dict[str, Any] = getattr(self, dimension + "s")
        return table.get(key) or table.get(DEFAULT)

    def project(self, key: str) -> Project | None:
        return self.find("project", key)  # type: ignore[no-any-return]

    def tier(self, key: str) -> PriorityTier | None:
        return self.find("tier", key)  # type: ignore[no-any-return]


@dataclass
class TraceSummary:
    """What an import read, before it writes, and what it wrote."""

    jobs: int = 0
    censored: int = 0  # closed at the trace's end
    waits_not_recorded: int = 0
    end: datetime | None = None
    # Per dimension, the trace's keys no map covers and their jobs ("" when the trace has
    # none: only * maps it).
    unmapped: dict[str, Counter[str]] = field(
        default_factory=lambda: {dimension: Counter() for dimension in DIMENSIONS}
    )
    written: bool = False
    ingest: IngestResult = field(default_factory=IngestResult)
    remapped: int = 0  # stored jobs whose project, tier, pool, flavor or GPUs changed

    def unmapped_jobs(self, dimension: str) -> int:
        return sum(self.unmapped[dimension].values())

    @property
    def complete(self) -> bool:
        return not any(self.unmapped_jobs(dimension) for dimension in DIMENSIONS)


def row_keys(fmt: str, row: dict[str, str]) -> dict[str, str]:
    """The trace's own key of each dimension for one row (what the maps are keyed by):
    openb the QoS class (project and tier) and the GPU model asked for (flavor); v2025 the
    app (project) and LS (tier); Philly the virtual cluster, ITP the cluster (project and
    pool). A key the format has not is empty: only ``*`` maps it."""
    if fmt == "alibaba-openb":
        qos = row["qos"]
        return {"project": qos, "tier": qos, "pool": "", "flavor": row.get("gpu_spec") or ""}
    if fmt == "alibaba-v2025":
        return {"project": row["app_name"], "tier": "LS", "pool": "", "flavor": ""}
    return {"project": row["cluster"], "tier": "", "pool": row["cluster"], "flavor": ""}


def _open(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _number(value: str) -> float | None:
    value = (value or "").strip()
    if not value:
        return None
    number = float(value)
    return None if math.isnan(number) else number


def trace_rows(path: Path, fmt: str) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        handle = _open(path)
    except OSError as error:
        raise TraceError(f"cannot open {path}: {error.strerror}") from error
    line = 1  # the header's
    with handle:
        try:
            reader = csv.DictReader(handle)
            missing = COLUMNS[fmt] - set(reader.fieldnames or [])
            if missing:
                columns = ", ".join(sorted(missing))
                raise TraceError(f"{path.name} is not a {fmt} trace: missing columns {columns}")
            for line, row in enumerate(reader, start=2):
                if None in row:  # csv puts the fields past the header's under None
                    raise TraceError(
                        f"{path.name} line {line}: {len(row[None])} more fields than the "
                        "header names"
                    )
                if any((value or "").strip() for value in row.values()):
                    yield line, row
        except (UnicodeDecodeError, OSError, gzip.BadGzipFile, EOFError) as error:
            raise TraceError(f"{path.name}: unreadable ({error})") from error
        except csv.Error as error:  # a field past the size limit: in the row after the last
            raise TraceError(f"{path.name} line {line + 1}: {error}") from error


OPEN_ENDED = ("alibaba-openb", "alibaba-v2025")  # formats whose jobs may have no end
TIMES = ("creation_time", "scheduled_time", "deletion_time")
# How far a trace's times and run times may reach: the published traces span 31 to 149 days
# (a Philly run 54 days). A time before the trace's start, or past two years after it, is a
# broken row, not a job (an ITP submit in year 5194).
SPAN = timedelta(days=730)
# Philly's times are absolute: a submit before 2000 or after now is no Philly job.
PHILLY_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)


def _offset(name: str, value: float | None) -> float | None:
    """A time in seconds from the trace's start, checked: not before the start (``--start``)
    and not past ``SPAN`` after it."""
    if value is None:
        return None
    if not math.isfinite(value):
        raise ValueError(f"{name} {value:g} is not a time")
    if value < 0:
        raise ValueError(
            f"{name} {value:g} s is before the trace's start (--start): times count from it"
        )
    if value > SPAN.total_seconds():
        raise ValueError(
            f"{name} {value:g} s is {value / 86400:.0f} days after the trace's start: "
            f"more than the {SPAN.days} days a trace can span"
        )
    return value


def _run_time(value: str) -> float:
    """A Philly or ITP run time in seconds, checked: at least 0, at most ``SPAN``."""
    duration = float(value)
    if not math.isfinite(duration) or duration < 0:
        raise ValueError(f"duration {duration:g} s is negative: a run cannot end before it starts")
    if duration > SPAN.total_seconds():
        raise ValueError(f"duration {duration:g} s is longer than the {SPAN.days} days of a trace")
    return duration


def trace_end(path: Path, fmt: str, start: datetime) -> float | None:
    """The latest time in an Alibaba trace, in seconds from its start (``None`` for a format
    whose every job has an end, or a file without times): where the observation ends, as far
    as the file shows. A time that falls outside the calendar after ``start`` (infinite, or
    past the year 9999) is refused with its line."""
    if fmt not in OPEN_ENDED:
        return None
    latest: float | None = None
    for line, row in trace_rows(path, fmt):
        for name in TIMES:
            try:
                value = _offset(name, _number(row.get(name, "")))
            except ValueError as error:
                raise TraceError(f"{path.name} line {line}: {error}") from error
            try:
                if value is not None:
                    start + timedelta(seconds=value)  # raises when no date holds it
            except OverflowError:
                raise TraceError(
                    f"{path.name} line {line}: {name} {value:g} s is out of range after --start"
                ) from None
            if value is not None and (latest is None or value > latest):
                latest = value
    return latest


def _events(
    fmt: str,
    path: Path,
    mapping: TraceMapping,
    start: datetime,
    source: str,
    end: float | None,
) -> Iterator[JobEvent]:
    at = lambda seconds: start + timedelta(seconds=seconds)  # noqa: E731
    for line, row in trace_rows(path, fmt):
        try:
            yield from _row_events(fmt, line, row, mapping, at, source, end)
        except (ValueError, TypeError, OverflowError) as error:
            raise TraceError(f"{path.name} line {line}: {error}") from error


def _row_events(fmt, line, row, mapping, at, source, end):  # type: ignore[no-untyped-def]
    if fmt in OPEN_ENDED:
        yield from _open_ended_events(fmt, row, mapping, at, source, end)
    else:
        yield from _finished_events(fmt, line, row, mapping, at, source)


# When an Alibaba job was created, scheduled and deleted (seconds from the trace's start).
Times = tuple[float | None, float | None, float | None]


def _finished_events(
    fmt: str,
    line: int,
    row: dict[str, str],
    mapping: TraceMapping,
    at: Callable[[float], datetime],
    source: str,
) -> Iterator[JobEvent]:
    """A Philly or ITP job: submitted, started, then ended after its duration. The file has
    no start time: the run is placed from the submit (the earliest it can have run), so its
    GPU-hours are the file's (GPUs × duration), and its wait is not recorded (unknown, not
    zero)."""
    duration = _run_time(row["duration"])
    if fmt == "philly":
        gpus = float(row["num_gpus"])
        job_id = f"philly-{line}"
        submitted = datetime.fromisoformat(row["timestamp"])
        # Philly's times carry no offset and are read as UTC; one with an offset is converted.
        if submitted.tzinfo is None:
            submitted = submitted.replace(tzinfo=UTC)
        submitted = submitted.astimezone(UTC)
        if not PHILLY_EARLIEST <= submitted <= datetime.now(UTC):
            raise ValueError(
                f"timestamp {row['timestamp']} is not a time a trace can hold "
                f"(from {PHILLY_EARLIEST:%Y} to now)"
            )
    else:
        gpus = float(row["num_gpu"])
        job_id = row["job_id"]
        submitted = at(_offset("submission_time", float(row["submission_time"])) or 0.0)
    common = _common(source, job_id, gpus, mapping, row_keys(fmt, row), submitted)
    yield JobEvent(event_id=f"{job_id}:submit", time=submitted, kind=EventKind.SUBMITTED, **common)
    yield JobEvent(
        event_id=f"{job_id}:start",
        time=submitted,
        kind=EventKind.STARTED,
        waits_known=False,
        **common,
    )
    yield JobEvent(
        event_id=f"{job_id}:end",
        time=submitted + timedelta(seconds=duration),
        kind=EventKind.ENDED,
        state=JobState.COMPLETED,
        waits_known=False,
        **common,
    )


def _alibaba_job(fmt: str, row: dict[str, str]) -> tuple[float, str, Times, bool, bool]:
    """An Alibaba row's GPUs, job id, times, whether it failed, and whether its wait is
    known."""
    created, scheduled, deleted = (_offset(name, _number(row.get(name, ""))) for name in TIMES)
    if created is not None and scheduled is not None and scheduled < created:
        raise ValueError(
            f"scheduled_time {scheduled:g} s is before its creation_time {created:g} s"
        )
    if fmt == "alibaba-openb":
        # num_gpu GPUs of gpu_milli thousandths each: a share of one GPU is kept as a fraction.
        milli = _number(row["gpu_milli"])
        if milli is not None and not 0 <= milli <= 1000:
            raise ValueError(
                f"gpu_milli {milli:g} is not a share of one GPU (thousandths: 0 to 1000)"
            )
        gpus = float(row["num_gpu"] or 0) * (1.0 if milli is None else milli / 1000)
        job_id = row["name"]
        return gpus, job_id, (created, scheduled, deleted), row["pod_phase"] == "Failed", True
    gpus = float(row["gpu_request"] or 0)
    job_id = row["instance_sn"]
    known = created is not None
    if created is None:  # existed before the window: its wait is unknown
        created = scheduled if scheduled is not None else 0.0
        scheduled = created
    return gpus, job_id, (created, scheduled, deleted), False, known


def _open_ended_events(
    fmt: str,
    row: dict[str, str],
    mapping: TraceMapping,
    at: Callable[[float], datetime],
    source: str,
    end: float | None,
) -> Iterator[JobEvent]:
    """An Alibaba job: submitted, started when scheduled, ended when deleted, or closed at
    the trace's ``end`` (censored) when it has no deletion time."""
    gpus, job_id, (created, scheduled, deleted), failed, known = _alibaba_job(fmt, row)
    if created is None:
        raise ValueError("no creation time")
    if deleted is not None and deleted < (scheduled if scheduled is not None else created):
        raise ValueError("deleted before it was created or scheduled")
    if end is not None:
        late = [value for value in (created, scheduled, deleted) if value is not None]
        if max(late) > end:
            raise ValueError(f"a time ({max(late):g} s) after the trace's end (--end)")
    submitted = at(created)
    common = _common(source, job_id, gpus, mapping, row_keys(fmt, row), submitted)
    yield JobEvent(event_id=f"{job_id}:submit", time=submitted, kind=EventKind.SUBMITTED, **common)
    if scheduled is not None:
        yield JobEvent(
            event_id=f"{job_id}:start",
            time=at(scheduled),
            kind=EventKind.STARTED,
            waits_known=known,
            **common,
        )
    if deleted is not None:
        state = JobState.FAILED if failed else JobState.COMPLETED
        if scheduled is None:
            state = JobState.CANCELLED
        yield JobEvent(
            event_id=f"{job_id}:end",
            time=at(deleted),
            kind=EventKind.ENDED,
            state=state,
            waits_known=known,
            **common,
        )
    elif end is not None:  # no deletion time
        # Still running or waiting when the trace ends: closed there (censored), not left
        # running forever; its true end is unknown.
        yield JobEvent(
            event_id=f"{job_id}:end",
            time=at(end),
            kind=EventKind.ENDED,
            state=JobState.CENSORED,
            waits_known=known,
            **common,
        )


def _common(source, job_id, gpus, mapping, keys, submitted):  # type: ignore[no-untyped-def]
    if not (job_id or "").strip():
        raise ValueError("no job id")
    if not math.isfinite(gpus) or gpus < 0:
        raise ValueError(f"GPUs must be a number of at least 0, not {gpus:g}")
    return {
        "source": source,
        "job_id": job_id,
        "scheduler": "trace",
        "project": mapping.find("project", keys["project"]),
        "tier": mapping.find("tier", keys["tier"]),
        "pool": mapping.find("pool", keys["pool"]),
        "flavor": mapping.find("flavor", keys["flavor"]),
        "gpus": round(gpus, 3),
        "submitted_at": submitted,
    }


Scanned = Callable[[TraceSummary], None]


def _scan(
    fmt: str,
    path: Path,
    mapping: TraceMapping,
    start: datetime,
    source: str,
    end: float | None,
    summary: TraceSummary,
) -> dict[str, tuple[Any, ...]]:
    """Read the whole file once without writing: every row checked, the jobs counted, the
    keys no map covers tallied; returns each job's (project, tier, pool, flavor, GPUs)."""
    by_quota = pool_maps()[0]
    wanted: dict[str, tuple[Any, ...]] = {}
    at = lambda seconds: start + timedelta(seconds=seconds)  # noqa: E731
    lines: dict[str, int] = {}  # each job id's line
    for line, row in trace_rows(path, fmt):
        try:
            events = list(_row_events(fmt, line, row, mapping, at, source, end))
        except (ValueError, TypeError, OverflowError) as error:
            raise TraceError(f"{path.name} line {line}: {error}") from error
        first = events[0]
        if first.job_id in lines:  # two rows would merge into one job
            raise TraceError(
                f"{path.name} line {line}: job id {first.job_id!r} repeats line "
                f"{lines[first.job_id]}: one row is one job"
            )
        lines[first.job_id] = line
        summary.jobs += 1
        summary.censored += any(event.state == JobState.CENSORED for event in events)
        summary.waits_not_recorded += any(not event.waits_known for event in events)
        project, tier, flavor = first.project, first.tier, first.flavor
        pool_id = first.pool.pk if first.pool is not None else None
        if pool_id is None and project is not None and flavor is not None:
            pool_id = by_quota.get((project.pk, flavor.pk))
        found = {"project": project, "tier": tier, "pool": pool_id, "flavor": flavor}
        keys = row_keys(fmt, row)
        for dimension in DIMENSIONS:
            if found[dimension] is None:
                summary.unmapped[dimension][keys[dimension]] += 1
        # A job of a format without start times starts at its submit (its ``started`` event);
        # the other formats' starts are the events' own (``KEEP``: not remapped).
        started = next((event.time for event in events if event.kind == EventKind.STARTED), None)
        wanted[first.job_id] = (
            project.pk if project else None,
            tier.pk if tier else None,
            first.pool.pk if first.pool is not None else None,
            flavor.pk if flavor else None,
            first.gpus,
            KEEP if fmt in OPEN_ENDED else started,
        )
    return wanted


REMAPPED = ("project_id", "tier_id", "pool_id", "flavor_id", "gpus", "started_at")
KEEP = object()  # a value the file does not decide: the stored one stays


def _remap(source: str, wanted: dict[str, tuple[Any, ...]]) -> int:
    """Bring the stored jobs of the trace to what the file and the maps say now (a re-import
    with new maps: its events are already stored, so the ingest changes nothing; a Philly or
    ITP job imported before its start was recorded gets it); their rollups are marked open,
    so the next rollup run rereads them and moves their hours and waits. Returns the jobs
    changed. (Jobs are not governed: no history to keep.)"""
    changed: list[WorkloadJob] = []
    keys = list(wanted)
    for offset in range(0, len(keys), 2000):
        stored = WorkloadJob.objects.filter(source=source, key__in=keys[offset : offset + 2000])
        for job in stored.only("pk", "key", *REMAPPED):
            values = wanted[job.key]
            differs = False
            for name, value in zip(REMAPPED, values, strict=True):
                if value is not KEEP and getattr(job, name) != value:
                    setattr(job, name, value)
                    differs = True
            if differs:
                changed.append(job)
    WorkloadJob.objects.bulk_update(
        changed, ["project", "tier", "pool", "flavor", "gpus", "started_at"], 1000
    )
    ids = [job.pk for job in changed]
    for offset in range(0, len(ids), 2000):
        WorkloadJobRollup.objects.filter(job_id__in=ids[offset : offset + 2000]).update(open=True)
    return len(changed)


def trace_import(
    *,
    path: Path,
    fmt: str,
    mapping: TraceMapping,
    start: datetime,
    source: str = "",
    end: datetime | None = None,
    allow_unmapped: bool = False,
    dry_run: bool = False,
    on_scanned: Scanned | None = None,
) -> TraceSummary:
    """Import one trace file; idempotent (event ids come from the trace's job ids).

    First reads the whole file without writing (``on_scanned`` gets what it found: the jobs,
    those closed at the trace's end, and per dimension the trace's keys no map covers, with
    their jobs). Writes nothing when ``dry_run``; raises ``TraceUnmapped`` (writing nothing)
    when a job would be stored without a project, tier, pool or flavor, unless
    ``allow_unmapped``. Otherwise stores the events, and brings the jobs already stored to
    the maps given now (a re-import with new maps updates them).

    ``end``: where the trace's observation ends (default: its latest time); the Alibaba jobs
    still open then are closed there as ``censored``."""
    if fmt not in FORMATS:
        raise TraceError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    seconds = trace_end(path, fmt, start)
    if end is not None and fmt in OPEN_ENDED:
        seconds = (end - start).total_seconds()
        if seconds < 0:
            raise TraceError("the trace's end (--end) is before its start (--start)")
    source = source or f"trace:{fmt}"
    summary = TraceSummary(end=start + timedelta(seconds=seconds) if seconds is not None else None)
    wanted = _scan(fmt, path, mapping, start, source, seconds, summary)
    if on_scanned is not None:
        on_scanned(summary)
    if dry_run:
        return summary
    if not summary.complete and not allow_unmapped:
        raise TraceUnmapped(summary)
    with transaction.atomic():  # a bad row anywhere stores nothing
        summary.ingest = events_ingest(events=_events(fmt, path, mapping, start, source, seconds))
        if summary.ingest.rejected:  # the scan let through what the ingest refuses
            first = summary.ingest.errors[0] if summary.ingest.errors else {}
            raise TraceError(
                f"nothing written: the ingest refused {summary.ingest.rejected} events, the "
                f"first {first.get('event_id', '')!r}: {first.get('error', '')}"
            )
        summary.remapped = _remap(source, wanted)
    summary.written = True
    return summary
