"""The one definition of each quantity the workload evidence reads (docs/definitions.md).

Every page, alert, API, CSV and approver's evidence that speaks of a job's wait, its pool or
its flavor reads these functions (or, for the monthly review, the ``WorkloadWait`` rows the
rollup derives with them), so two answers about one job cannot disagree:

- **A job's wait** (``job_wait``): its *first* wait, from the submit to its first start. A job
  that ended without ever starting (cancelled, or failed, while pending) waited until that end
  and is counted as *never started*; a job still waiting is *censored* at the moment asked
  (the window's end for the review, now for a page). Requeues and later waits do not add to
  it.
  A job closed at the end of its source's observation while still waiting (state
  ``censored``: a trace's end) is still waiting, its wait known up to that end (a lower
  bound).
  A job without a submit time, or whose source cannot tell its wait (``waits_recorded``
  false: a trace without start times, an instance that existed before the trace), has none.
- **A job's current wait** (``current_wait_seconds``): how long a job that is pending now has
  been pending since it last became pending (its submit, or its last requeue). Only the
  long-wait alert reads it, and names it so.
- **A job's tier**: the tier its collector filed it under, which is the effective tier of its
  project at submit time, grants included, as the last sync compiled it (the Slurm collector
  reads it from the QOS, see ``queues.services.workload.slurm``). Stored on the job.
- **A job's flavor**: the GPU flavor its collector resolved from what it asked for. Stored on
  the job.
- **GPUs running** (``running_gpus``): the GPUs asked for by the jobs in state ``running``,
  fractions kept (a job on half a GPU holds 0.5), summed per the columns asked for. Every
  page, API, check and placement answer that shows or compares running GPUs reads it; the
  placement's prepared query embeds the SQL Django compiles from it (``running_gpus_sql``).
- **A job's pool** (``job_pool_id``): the pool its source names (a trace's ``--pool-map``),
  else the pool of its project's quota for its flavor (the lowest id when the project has
  the flavor in several pools), else its cluster's pool (the lowest id), else none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Min, Q, QuerySet, Sum

from governance.models import Quota
from queues.models import Cluster, EventKind, JobState, WorkloadEvent, WorkloadJob

# The columns a job's wait is computed from (``job_wait`` with ``first_starts``): what a
# reader of many jobs' waits loads (``.only(*WAIT_FIELDS)``).
WAIT_FIELDS = (
    "project_id",
    "category",
    "state",
    "submitted_at",
    "started_at",
    "ended_at",
    "preemptions",
    "requeues",
    "waits_recorded",
)


def running_gpus_sum() -> Sum:
    """GPUs running (see the module's docstring) as an aggregate, for a query that reads them
    beside other figures (``.annotate(running=running_gpus_sum(), ...)``)."""
    return Sum("gpus", filter=Q(state=JobState.RUNNING), default=0.0)


def running_gpus(
    jobs: QuerySet[WorkloadJob], *, by: tuple[str, ...]
) -> dict[tuple[Any, ...], float]:
    """GPUs running of ``jobs``, per the values of ``by`` (``("project_id", "flavor_id")`` →
    ``{(project, flavor): 2.5}``), fractions kept; one query."""
    rows = _running_rows(jobs, by=by).values_list(*by, "total")
    return {tuple(row[:-1]): float(row[-1] or 0) for row in rows}


def _running_rows(jobs: QuerySet[WorkloadJob], *, by: tuple[str, ...]) -> QuerySet[Any]:
    return (
        jobs.filter(state=JobState.RUNNING)
        .order_by()
        .values(*by)
        .annotate(total=running_gpus_sum())
    )


# Stand-ins for the SQL that ``running_gpus_sql`` puts in the compiled query's place.
_PROJECT, _FLAVOR = -40_001, -40_002


def running_gpus_sql(*, project: str, flavor: str | None) -> str:
    """GPUs running of one project's jobs of one flavor (``flavor`` ``None``: the jobs without
    one), as a scalar SQL subquery (``NULL`` when none runs): the query ``running_gpus``
    makes, compiled by Django, with ``project`` and ``flavor`` (SQL: a placeholder, or a
    subquery) in place of their values. The placement's prepared query embeds it, so that it
    cannot count running GPUs in another way than every page."""
    jobs = WorkloadJob.objects.filter(project_id=_PROJECT)
    jobs = jobs.filter(flavor_id=_FLAVOR) if flavor is not None else jobs.filter(flavor_id=None)
    sql, params = _running_rows(jobs, by=("project_id",)).values("total").query.sql_with_params()
    stand_ins = {_PROJECT: project, **({_FLAVOR: flavor} if flavor is not None else {})}
    pieces = sql.split("%s")
    if len(pieces) != len(params) + 1:
        raise ValueError(f"unexpected placeholders in {sql!r}")
    out = pieces[0]
    for param, piece in zip(params, pieces[1:], strict=True):
        out += (stand_ins[param] if param in stand_ins else _literal(param)) + piece
    return f"({out})"


def _literal(value: Any) -> str:
    """A constant of the definition (the running state, a default of 0) as SQL."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"no SQL literal for {value!r}")
    if isinstance(value, str):
        if not value.replace("_", "").isalnum():
            raise ValueError(f"no SQL literal for {value!r}")
        return f"'{value}'"
    return repr(value)


@dataclass(frozen=True)
class JobWait:
    """A job's (first) wait, as ``job_wait`` defines it."""

    start: datetime
    end: datetime | None  # the first start, or the end of a job that never started
    seconds: int  # end − start; for a wait still going on, the moment asked − start
    started: bool  # the wait ended with a start
    never_started: bool  # the job ended (cancelled, failed) without ever starting

    @property
    def ongoing(self) -> bool:
        return self.end is None


def first_start_from_events(events: Iterable[WorkloadEvent]) -> datetime | None:
    return min((event.time for event in events if event.kind == EventKind.STARTED), default=None)


def needs_events(job: WorkloadJob) -> bool:
    """A job's own ``started_at`` is its latest start: a job preempted or requeued may have
    started before it, and its first start is read from its events."""
    return bool(job.preemptions or job.requeues)


def first_start(job: WorkloadJob, events: Iterable[WorkloadEvent] | None = None) -> datetime | None:
    """The job's first start (``events``: its events, when the caller has read them)."""
    if not needs_events(job):
        return job.started_at
    if events is None:
        found = WorkloadEvent.objects.filter(job=job, kind=EventKind.STARTED).aggregate(
            first=Min("time")
        )["first"]
    else:
        found = first_start_from_events(events)
    candidates = [moment for moment in (found, job.started_at) if moment is not None]
    return min(candidates, default=None)


def first_starts(jobs: Iterable[WorkloadJob]) -> dict[int, datetime]:
    """The first start of each job that needs its events (one query for all of them)."""
    ids = [job.pk for job in jobs if needs_events(job)]
    if not ids:
        return {}
    return dict(
        WorkloadEvent.objects.filter(job_id__in=ids, kind=EventKind.STARTED)
        .order_by()
        .values("job_id")
        .annotate(first=Min("time"))
        .values_list("job_id", "first")
    )


def wait_end(job: WorkloadJob, started: datetime | None) -> datetime | None:
    """Where the job's wait ends, given its first start: that start, else its end (for a job
    censored while waiting, the end of its source's observation: see ``wait_censored``)."""
    return started if started is not None else job.ended_at


def wait_censored(job: WorkloadJob, started: datetime | None) -> bool:
    """Whether the job was still waiting when its source stopped observing it (closed at a
    trace's end): its wait then ends there as a lower bound, and it counts as still waiting,
    not as never started."""
    return started is None and job.state == JobState.CENSORED


UNREAD: Any = object()


def job_wait(job: WorkloadJob, *, now: datetime, started: Any = UNREAD) -> JobWait | None:
    """The job's wait (see the module's docstring), censored at ``now``; ``None`` for a job
    without a submit time. ``started``: its first start (or ``None``) when the caller knows
    it; read otherwise."""
    if job.submitted_at is None or not job.waits_recorded:
        return None
    began: datetime | None = first_start(job) if started is UNREAD else started
    end = wait_end(job, began)
    stop = now
    if end is not None and end > now:
        end = None  # a start after the moment asked: still waiting then
        began = None
    elif end is not None and wait_censored(job, began):
        stop, end = end, None  # still waiting when its source stopped: known until then
    elif end is not None:
        stop = end
    return JobWait(
        start=job.submitted_at,
        end=end,
        seconds=int(max(0.0, (stop - job.submitted_at).total_seconds())),
        started=began is not None,
        never_started=began is None and end is not None,
    )


def current_wait_seconds(job: WorkloadJob, *, now: datetime) -> int | None:
    """How long a pending job has been pending since it last became pending; ``None`` for a
    job that is not pending (or whose pending time is unknown)."""
    if job.state != JobState.PENDING or job.pending_since is None:
        return None
    return int(max(0.0, (now - job.pending_since).total_seconds()))


PoolMaps = tuple[dict[tuple[int, int], int], dict[int, int]]


def pool_maps() -> PoolMaps:
    """What ``job_pool_id`` reads: the pool of each (project, flavor) quota and of each
    cluster (two queries)."""
    by_quota = {
        (row["project_id"], row["flavor_id"]): row["pool_min"]
        for row in Quota.objects.order_by()
        .values("project_id", "flavor_id")
        .annotate(pool_min=Min("pool_id"))
    }
    by_cluster = {
        row["pk"]: row["pool_min"]
        for row in Cluster.objects.order_by().values("pk").annotate(pool_min=Min("pools__id"))
        if row["pool_min"] is not None
    }
    return by_quota, by_cluster


def job_pool_id(*, job: WorkloadJob, maps: PoolMaps) -> int | None:
    """The job's pool (see the module's docstring)."""
    if job.pool_id is not None:
        return job.pool_id
    by_quota, by_cluster = maps
    pool = by_quota.get((job.project_id, job.flavor_id))  # type: ignore[arg-type]
    if pool is None and job.cluster_id is not None:
        pool = by_cluster.get(job.cluster_id)
    return pool
