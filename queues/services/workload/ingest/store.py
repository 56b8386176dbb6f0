"""The reads and writes of one chunk: the stored event ids and jobs, and the set-based writes
(``COPY`` on PostgreSQL, the ORM elsewhere)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db import connection

from queues.models import (
    WorkloadEvent,
    WorkloadJob,
)

from .rows import EVENT_COLUMNS, IDENTITY, JOB_FIELDS, JobRow


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
