"""``events_ingest``: the events per chunk of ``BATCH``, one transaction each (see the
package's docstring)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import DataError, IntegrityError, connection, transaction
from django.utils.translation import gettext as _

from queues.schedulers.classify import Verdict

from .advance import _apply
from .rows import (
    BATCH,
    KIND_ORDER,
    KIND_STATES,
    Contradiction,
    IngestResult,
    JobEvent,
    JobRow,
    PositionFor,
)
from .store import _orm_store, _pg_store, _stored_event_ids, _stored_jobs


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
