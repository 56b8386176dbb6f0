"""The hourly rollup of the workload evidence (``WorkloadHour``), maintained incrementally.

Each run rereads the jobs whose ``last_event_at`` is after the watermark (minus a look-back
for evidence that arrives late, ``ARBITER_ROLLUP_LOOKBACK_HOURS``), the jobs added since the
last run whatever their times (a collector catching up, an imported trace), and every job
still open (its running or waiting time grows with the clock) or whose rollup row is marked
open for one reread (a trace re-imported with new maps: ``traces._remap``), computes what each
contributes to the hours now, and applies the difference from what it contributed at the
previous run (``WorkloadJobRollup``). So a run is idempotent: running it twice, or over jobs already
counted, changes nothing; a job whose project, tier or flavor changed moves its hours.

A job contributes, to the UTC hours it overlaps:

- ``gpu_seconds``: GPUs × seconds running (from each start or resume to the preemption,
  suspension, requeue or end that stops it; the cut-off for a job still running);
- ``quota_wait_seconds``: seconds pending, when the job's wait category is *quota* (from the
  submit, or requeue, to the start; the cut-off for a job still waiting; the cancellation for
  a job cancelled while pending);
- ``resource_wait_seconds``: the same seconds pending, when its wait category is *resource*
  (the pool had no free GPUs for it).

A contribution stored before ``resource_wait`` was kept has no such key: it counts as none,
and differs from the one computed now, so the job's next reread adds its resource wait once
(migration ``0025_hour_resource_wait`` has every job reread).

Jobs with neither preemptions, requeues nor suspension use their own fields (submit, start,
end); the others replay their events. The pool of a job is the pool of its project's quota
for the job's flavor (the lowest id when there are several), else its cluster's pool
(``queues.selectors.definitions.job_pool_id``).

The same run keeps each job's first wait (``WorkloadWait``, what the review's waits read):
it ends at the job's first start (its first ``started`` event when it was preempted or
requeued), or at its end when it never started (``started`` says which); while the job
waits it has no end. A job closed while waiting at the end of its source's observation
(state ``censored``) keeps that end, marked ``censored``: still waiting then, not
started. A job without a submit time has none.

A job closed at a trace's end (``censored``) has an end like any finished job: it runs and
waits up to that end and no further, and leaves the jobs every run rereads.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from queues.models import (
    ACTIVE_STATES,
    ROLLUP_NAME,
    EventKind,
    JobState,
    RollupState,
    WaitCategory,
    WorkloadEvent,
    WorkloadHour,
    WorkloadJob,
    WorkloadJobRollup,
    WorkloadWait,
)
from queues.selectors import definitions
from queues.selectors.evidence import rollup_lookback

HOUR_SUMS = ["gpu_seconds", "quota_wait_seconds", "resource_wait_seconds"]
Interval = tuple[float, float]
Key = tuple[int | None, int | None, int | None, int | None]  # pool, flavor, project, tier


def _ts(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def _clip(
    intervals: Iterable[tuple[float | None, float | None]], cutoff: float
) -> list[list[float]]:
    kept = []
    for begin, finish in intervals:
        if begin is None or finish is None:
            continue
        finish = min(finish, cutoff)
        if finish > begin:
            kept.append([begin, finish])
    return kept


def job_intervals(
    *, job: WorkloadJob, events: list[WorkloadEvent], cutoff: float
) -> tuple[list[list[float]], list[list[float]]]:
    """(running intervals, pending intervals) of ``job`` as epoch seconds, up to ``cutoff``."""
    end = _ts(job.ended_at)
    if not events:
        start = _ts(job.started_at)
        submit = _ts(job.submitted_at)
        ran = [(start, end if end is not None else cutoff)] if start is not None else []
        wait_end = start if start is not None else (end if end is not None else cutoff)
        return _clip(ran, cutoff), _clip([(submit, wait_end)], cutoff)
    run: list[tuple[float | None, float | None]] = []
    wait: list[tuple[float | None, float | None]] = []
    running: float | None = None
    pending: float | None = _ts(job.submitted_at)
    for event in events:
        at = event.time.timestamp()
        if event.kind in (EventKind.STARTED, EventKind.RESUMED):
            if pending is not None:
                wait.append((pending, at))
                pending = None
            if running is None:
                running = at
        elif event.kind in (
            EventKind.PREEMPTED,
            EventKind.SUSPENDED,
            EventKind.REQUEUED,
            EventKind.ENDED,
        ):
            if running is not None:
                run.append((running, at))
                running = None
            if event.kind == EventKind.REQUEUED:
                pending = at
            elif event.kind == EventKind.ENDED and pending is not None:
                wait.append((pending, at))
                pending = None
        elif (
            event.kind in (EventKind.SUBMITTED, EventKind.PENDING)
            and pending is None
            and running is None
            and end is None
        ):
            pending = at
    if running is not None:
        run.append((running, end if end is not None else cutoff))
    if pending is not None:
        wait.append((pending, end if end is not None else cutoff))
    return _clip(run, cutoff), _clip(wait, cutoff)


def _hours(intervals: list[list[float]], weight: float) -> Iterable[tuple[int, float]]:
    for begin, finish in intervals:
        hour = int(begin // 3600) * 3600
        while hour < finish:
            seconds = min(finish, hour + 3600) - max(begin, hour)
            if seconds > 0:
                yield hour, seconds * weight
            hour += 3600


def _add(
    deltas: dict[tuple[int, Key], list[float]], contribution: dict[str, Any], sign: int
) -> None:
    if not contribution:
        return
    key: Key = tuple(contribution["key"])  # type: ignore[assignment]
    for hour, value in _hours(contribution.get("run", []), contribution.get("gpus", 0)):
        deltas[(hour, key)][0] += sign * value
    for hour, value in _hours(contribution.get("quota_wait", []), 1):
        deltas[(hour, key)][1] += sign * value
    for hour, value in _hours(contribution.get("resource_wait", []), 1):
        deltas[(hour, key)][2] += sign * value


def job_wait(
    *, job: WorkloadJob, events: list[WorkloadEvent], pool_id: int | None
) -> WorkloadWait | None:
    """The first wait of ``job`` as ``queues.selectors.definitions`` defines it (``events``:
    its events in time order, when it is replayed), or ``None`` for a job without a submit
    time or whose source cannot tell its wait."""
    if job.submitted_at is None or not job.waits_recorded:
        return None
    started = (
        definitions.first_start(job, events) if definitions.needs_events(job) else job.started_at
    )
    return WorkloadWait(
        job_id=job.pk,
        submitted_at=job.submitted_at,
        day=job.submitted_at.astimezone(UTC).date(),
        project_id=job.project_id,
        tier_id=job.tier_id,
        flavor_id=job.flavor_id,
        pool_id=pool_id,
        category=job.category,
        wait_end=definitions.wait_end(job, started),
        censored=definitions.wait_censored(job, started),
        started=started is not None,
    )


WAIT_FIELDS = [
    "submitted_at",
    "day",
    "project_id",
    "tier_id",
    "flavor_id",
    "pool_id",
    "category",
    "wait_end",
    "censored",
    "started",
]


def _wait_values(wait: WorkloadWait) -> tuple[Any, ...]:
    return tuple(getattr(wait, name) for name in WAIT_FIELDS)


def _apply_waits(*, batch_ids: list[int], waits: dict[int, WorkloadWait | None]) -> int:
    """Write the batch's waits where they differ from the stored ones; returns rows written.
    Derived rows in bulk, like the hours: the database's constraints hold their invariants."""
    stored = {row.job_id: row for row in WorkloadWait.objects.filter(job_id__in=batch_ids)}
    to_create: list[WorkloadWait] = []
    to_update: list[WorkloadWait] = []
    to_delete: list[int] = []
    for job_id, wait in waits.items():
        old = stored.get(job_id)
        if wait is None:
            if old is not None:
                to_delete.append(job_id)
        elif old is None:
            to_create.append(wait)
        elif _wait_values(old) != _wait_values(wait):
            to_update.append(wait)
    WorkloadWait.objects.bulk_create(to_create, batch_size=1000)
    WorkloadWait.objects.bulk_update(to_update, WAIT_FIELDS, batch_size=1000)
    WorkloadWait.objects.filter(job_id__in=to_delete).delete()
    return len(to_create) + len(to_update) + len(to_delete)


def _apply(deltas: dict[tuple[int, Key], list[float]]) -> int:
    """Add the deltas (GPU-seconds, quota wait, resource wait) to the hour rows (rounded to
    whole seconds); returns rows touched."""
    changed = {
        key: (round(gpu), round(wait), round(resource))
        for key, (gpu, wait, resource) in deltas.items()
        if round(gpu) or round(wait) or round(resource)
    }
    if not changed:
        return 0
    hours = {datetime.fromtimestamp(hour, tz=UTC) for hour, _ in changed}
    existing: dict[tuple[int, Key], WorkloadHour] = {}
    for stored in WorkloadHour.objects.filter(hour__in=hours).select_for_update():
        dims: Key = (stored.pool_id, stored.flavor_id, stored.project_id, stored.tier_id)
        existing[(int(stored.hour.timestamp()), dims)] = stored
    to_create: list[WorkloadHour] = []
    to_update: list[WorkloadHour] = []
    to_delete: list[int] = []
    for (hour, key), (gpu, wait, resource) in changed.items():
        row = existing.get((hour, key))
        if row is None:
            pool, flavor, project, tier = key
            to_create.append(
                WorkloadHour(
                    hour=datetime.fromtimestamp(hour, tz=UTC),
                    pool_id=pool,
                    flavor_id=flavor,
                    project_id=project,
                    tier_id=tier,
                    gpu_seconds=max(0, gpu),
                    quota_wait_seconds=max(0, wait),
                    resource_wait_seconds=max(0, resource),
                )
            )
            continue
        row.gpu_seconds = max(0, row.gpu_seconds + gpu)
        row.quota_wait_seconds = max(0, row.quota_wait_seconds + wait)
        row.resource_wait_seconds = max(0, row.resource_wait_seconds + resource)
        if row.gpu_seconds == 0 and row.quota_wait_seconds == 0 and row.resource_wait_seconds == 0:
            to_delete.append(row.pk)
        else:
            to_update.append(row)
    WorkloadHour.objects.bulk_create(to_create, batch_size=1000)
    WorkloadHour.objects.bulk_update(to_update, HOUR_SUMS, 1000)
    WorkloadHour.objects.filter(pk__in=to_delete).delete()
    return len(changed)


@transaction.atomic
def workload_hours_roll_up(
    *, until: datetime | None = None, batch_size: int = 2000
) -> dict[str, int]:
    """Bring ``WorkloadHour`` up to ``until`` (now by default); see the module's docstring.

    One run at a time (the state row is locked); returns the jobs reread, those whose hours
    changed, the hour rows touched and the waits written.
    """
    cutoff_at = until or timezone.now()
    cutoff = cutoff_at.timestamp()
    RollupState.objects.get_or_create(name=ROLLUP_NAME)
    state = RollupState.objects.select_for_update().get(name=ROLLUP_NAME)
    lookback = rollup_lookback()
    ids = _job_ids(state, lookback)
    maps = definitions.pool_maps()
    counts = {"jobs": 0, "changed": 0, "hours": 0, "waits": 0}
    for offset in range(0, len(ids), batch_size):
        batch_ids = ids[offset : offset + batch_size]
        batch = list(WorkloadJob.objects.filter(pk__in=batch_ids).order_by("pk"))
        replay = [
            job.pk
            for job in batch
            if job.preemptions or job.requeues or job.state == JobState.SUSPENDED
        ]
        events: dict[int, list[WorkloadEvent]] = defaultdict(list)
        for event in WorkloadEvent.objects.filter(job_id__in=replay).order_by("time", "id"):
            events[event.job_id].append(event)
        previous = {
            row.job_id: row for row in WorkloadJobRollup.objects.filter(job_id__in=batch_ids)
        }
        deltas: dict[tuple[int, Key], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        to_create, to_update = [], []
        waits: dict[int, WorkloadWait | None] = {}
        for job in batch:
            job_events = events.get(job.pk, [])
            run, wait = job_intervals(job=job, events=job_events, cutoff=cutoff)
            pool_id = definitions.job_pool_id(job=job, maps=maps)
            waits[job.pk] = job_wait(job=job, events=job_events, pool_id=pool_id)
            contribution = {
                "key": [
                    pool_id,
                    job.flavor_id,
                    job.project_id,
                    job.tier_id,
                ],
                "gpus": job.gpus,
                "run": run,
                "quota_wait": wait if job.category == WaitCategory.QUOTA else [],
                "resource_wait": wait if job.category == WaitCategory.RESOURCE else [],
            }
            is_open = job.ended_at is None
            counts["jobs"] += 1
            old = previous.get(job.pk)
            if old is not None and old.contribution == contribution and old.open == is_open:
                continue
            counts["changed"] += 1
            if old is not None:
                _add(deltas, old.contribution, -1)
                old.contribution, old.open = contribution, is_open
                to_update.append(old)
            else:
                to_create.append(
                    WorkloadJobRollup(job_id=job.pk, contribution=contribution, open=is_open)
                )
            _add(deltas, contribution, +1)
        counts["hours"] += _apply(deltas)
        counts["waits"] += _apply_waits(batch_ids=batch_ids, waits=waits)
        WorkloadJobRollup.objects.bulk_create(to_create, batch_size=1000)
        WorkloadJobRollup.objects.bulk_update(to_update, ["contribution", "open"], 1000)
    state.watermark = cutoff_at
    state.last_job_id = max(ids[-1] if ids else 0, state.last_job_id)
    state.last_run_at = timezone.now()
    state.last_counts = counts
    state.save(update_fields=["watermark", "last_job_id", "last_run_at", "last_counts"])
    return counts


def _job_ids(state: RollupState, lookback: timedelta) -> list[int]:
    """The jobs to reread, in key order: all of them on the first run."""
    # Four index reads, not one OR over the whole table: the jobs added since the last run
    # (primary key), those changed since the watermark (job_last_event), the active ones
    # (job_state_category), and those whose last contribution was still open
    # (job_rollup_open).
    if state.watermark is None:
        return list(WorkloadJob.objects.order_by("pk").values_list("pk", flat=True))
    added = WorkloadJob.objects.filter(pk__gt=state.last_job_id)
    changed = WorkloadJob.objects.filter(last_event_at__gt=state.watermark - lookback)
    active = WorkloadJob.objects.filter(state__in=ACTIVE_STATES)
    still_open = WorkloadJobRollup.objects.filter(open=True)
    return sorted(
        set(added.values_list("pk", flat=True))
        | set(changed.values_list("pk", flat=True))
        | set(active.values_list("pk", flat=True))
        | set(still_open.values_list("job_id", flat=True))
    )
