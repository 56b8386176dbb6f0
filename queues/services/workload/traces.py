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
  recorded as submitted and ended at submit + run time (a lower bound of its end).
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
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.db import transaction

from governance.models import PriorityTier, Project
from queues.models import EventKind, JobState

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


@dataclass
class TraceMapping:
    projects: dict[str, Project]
    tiers: dict[str, PriorityTier]

    def project(self, key: str) -> Project | None:
        return self.projects.get(key) or self.projects.get(DEFAULT)

    def tier(self, key: str) -> PriorityTier | None:
        return self.tiers.get(key) or self.tiers.get(DEFAULT)


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
    with handle:
        try:
            reader = csv.DictReader(handle)
            missing = COLUMNS[fmt] - set(reader.fieldnames or [])
            if missing:
                columns = ", ".join(sorted(missing))
                raise TraceError(f"{path.name} is not a {fmt} trace: missing columns {columns}")
            for line, row in enumerate(reader, start=2):
                if any((value or "").strip() for value in row.values()):
                    yield line, row
        except (UnicodeDecodeError, OSError, gzip.BadGzipFile, EOFError) as error:
            raise TraceError(f"{path.name}: unreadable ({error})") from error


OPEN_ENDED = ("alibaba-openb", "alibaba-v2025")  # formats whose jobs may have no end
TIMES = ("creation_time", "scheduled_time", "deletion_time")


def trace_end(path: Path, fmt: str) -> float | None:
    """The latest time in an Alibaba trace, in seconds from its start (``None`` for a format
    whose every job has an end, or a file without times): where the observation ends, as far
    as the file shows."""
    if fmt not in OPEN_ENDED:
        return None
    latest: float | None = None
    for line, row in trace_rows(path, fmt):
        for name in TIMES:
            try:
                value = _number(row.get(name, ""))
            except ValueError as error:
                raise TraceError(f"{path.name} line {line}: {error}") from error
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
    if fmt == "alibaba-openb":
        # num_gpu GPUs of gpu_milli thousandths each: a share of one GPU is kept as a fraction.
        milli = _number(row["gpu_milli"])
        gpus = float(row["num_gpu"] or 0) * (1.0 if milli is None else milli / 1000)
        key, tier_key = row["qos"], row["qos"]
        job_id, created = row["name"], _number(row["creation_time"])
        scheduled, deleted = (
            _number(row.get("scheduled_time", "")),
            _number(row.get("deletion_time", "")),
        )
        failed = row["pod_phase"] == "Failed"
        known = True
    elif fmt == "alibaba-v2025":
        gpus = float(row["gpu_request"] or 0)
        key, tier_key = row["app_name"], "LS"
        job_id, created = row["instance_sn"], _number(row["creation_time"])
        scheduled, deleted = (
            _number(row.get("scheduled_time", "")),
            _number(row.get("deletion_time", "")),
        )
        failed, known = False, created is not None
        if created is None:  # existed before the window: its wait is unknown
            created = scheduled if scheduled is not None else 0.0
            scheduled = created
    else:
        duration = float(row["duration"])
        if fmt == "philly":
            gpus, key = float(row["num_gpus"]), row["cluster"]
            job_id = f"philly-{line}"
            submitted = datetime.fromisoformat(row["timestamp"]).replace(tzinfo=UTC)
        else:
            gpus, key = float(row["num_gpu"]), row["cluster"]
            job_id = row["job_id"]
            submitted = at(float(row["submission_time"]))
        common = _common(
            source, job_id, gpus, mapping.project(key), mapping.tier(DEFAULT), submitted
        )
        yield JobEvent(
            event_id=f"{job_id}:submit", time=submitted, kind=EventKind.SUBMITTED, **common
        )
        yield JobEvent(
            event_id=f"{job_id}:end",
            time=submitted + timedelta(seconds=duration),
            kind=EventKind.ENDED,
            state=JobState.COMPLETED,
            waits_known=False,
            **common,
        )
        return
    if created is None:
        raise ValueError("no creation time")
    if deleted is not None and deleted < (scheduled if scheduled is not None else created):
        raise ValueError("deleted before it was created or scheduled")
    if end is not None:
        late = [value for value in (created, scheduled, deleted) if value is not None]
        if max(late) > end:
            raise ValueError(f"a time ({max(late):g} s) after the trace's end (--end)")
    submitted = at(created)
    common = _common(source, job_id, gpus, mapping.project(key), mapping.tier(tier_key), submitted)
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


def _common(source, job_id, gpus, project, tier, submitted):  # type: ignore[no-untyped-def]
    if not math.isfinite(gpus) or gpus < 0:
        raise ValueError(f"GPUs must be a number of at least 0, not {gpus:g}")
    return {
        "source": source,
        "job_id": job_id,
        "scheduler": "trace",
        "project": project,
        "tier": tier,
        "gpus": round(gpus, 3),
        "submitted_at": submitted,
    }


def trace_import(
    *,
    path: Path,
    fmt: str,
    mapping: TraceMapping,
    start: datetime,
    source: str = "",
    end: datetime | None = None,
) -> IngestResult:
    """Import one trace file; idempotent (event ids come from the trace's job ids).

    ``end``: where the trace's observation ends (default: its latest time); the Alibaba jobs
    still open then are closed there as ``censored``."""
    if fmt not in FORMATS:
        raise TraceError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    seconds = trace_end(path, fmt)
    if end is not None and fmt in OPEN_ENDED:
        seconds = (end - start).total_seconds()
        if seconds < 0:
            raise TraceError("the trace's end (--end) is before its start (--start)")
    events = _events(fmt, path, mapping, start, source or f"trace:{fmt}", seconds)
    with transaction.atomic():  # a bad row anywhere stores nothing
        return events_ingest(events=events)
