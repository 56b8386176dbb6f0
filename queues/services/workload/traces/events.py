"""A trace's rows as workload events: finished jobs, and the open-ended jobs of the Alibaba
formats."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from queues.models import EventKind, JobState

from ..ingest import JobEvent
from .files import (
    OPEN_ENDED,
    PHILLY_EARLIEST,
    TIMES,
    TraceError,
    TraceMapping,
    _number,
    _offset,
    _run_time,
    row_keys,
    trace_rows,
)


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
