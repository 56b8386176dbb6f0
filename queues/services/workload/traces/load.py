"""``trace_import``: a trace scanned, its events ingested, the jobs it maps anew remapped."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.db import transaction

from queues.models import EventKind, JobState, WorkloadJob, WorkloadJobRollup
from queues.selectors.definitions import pool_maps

from ..ingest import events_ingest
from .events import _events, _row_events
from .files import (
    DIMENSIONS,
    FORMATS,
    OPEN_ENDED,
    TraceError,
    TraceMapping,
    TraceSummary,
    TraceUnmapped,
    row_keys,
    trace_end,
    trace_rows,
)

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
