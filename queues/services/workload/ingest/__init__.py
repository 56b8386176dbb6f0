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

The package re-exports every public name it held as one module.
"""

from .rows import (
    BATCH,
    DESCRIPTIVE,
    EVENT_COLUMNS,
    FINISHED,
    IDENTITY,
    JOB_FIELDS,
    KIND_ORDER,
    KIND_STATES,
    MAX_ERRORS,
    Contradiction,
    IngestResult,
    JobEvent,
    JobRow,
    PositionFor,
)
from .run import events_ingest

__all__ = [
    "BATCH",
    "DESCRIPTIVE",
    "EVENT_COLUMNS",
    "FINISHED",
    "IDENTITY",
    "JOB_FIELDS",
    "KIND_ORDER",
    "KIND_STATES",
    "MAX_ERRORS",
    "Contradiction",
    "IngestResult",
    "JobEvent",
    "JobRow",
    "PositionFor",
    "events_ingest",
]
