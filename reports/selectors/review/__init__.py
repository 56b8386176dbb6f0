"""The monthly review's metrics for a window (contract B between the reports helpers).

``review_metrics`` returns plain JSON data, every figure computed in the database (a fixed
number of queries, whatever the size of the window or of the history);
``review_metrics_by_project`` returns the same and, in the same queries, each project's view
(what ``review_metrics`` gives with that project as scope), for the review's build:

**Waits** read the jobs *submitted* in ``[start, end)``, each as its first wait kept by the
hourly rollup (``queues.WorkloadWait``: one narrow row per job, read index-only on
PostgreSQL from ``workload_wait_review``, so the cost follows the window; the review's build
brings the rollup up to date first). A job's wait is its first start − its submit; when it
had not started by the window's end it is censored: ``end − submit``, counted in
``waiting_at_end`` and in the percentiles at that value (a starving project cannot look
good). A job cancelled while pending waits until its cancellation and counts in
``never_started`` (its wait ended before the window's end without a start). A job's pool is
the one the rollup gave it (as for its hours). ``over_threshold`` counts waits longer than
the tier's wait alert (``wait_alert_minutes``, its target). Each group has p50, p90, p95 and
p99, the mean and the longest wait. Percentiles are continuous (``percentile_cont``:
on PostgreSQL from one sort of the window's waits per query, its grouping sets in one pass,
see ``_sql.percentile_sets``).

On PostgreSQL, called outside a transaction, the review's queries run on
``ARBITER_REVIEW_CONNECTIONS`` connections at once (the waits' grouping sets in two halves,
service, preemptions, exceptions, timeline; one connection sorts the waits once for every
set), each importing the snapshot of the
calling transaction, so they read the same data as one transaction would
(``_sql.snapshot_export``, ``_sql.run_all``).

**Service, borrowing, lending and capacity** read the hourly rollup ``queues.WorkloadHour``
(hours whose start is in ``(start − 1 h, end)``: the window at hour granularity). Per hour,
project, pool and flavor, with ``used`` the GPU-seconds that ran and ``G`` the project's
guarantee × 3600:

- *within guarantee* = min(used, G); *borrowed* = max(0, used − G);
- *lent*: the GPUs borrowed in an hour first use the pool's unguaranteed capacity
  (capacity − Σ guarantees); what is borrowed beyond it (``excess``) came out of the idle
  guarantees of the other projects, and each project lent its part in proportion to its
  lendable idle guarantee, min(max(0, G − used), lending limit × 3600), so
  lent = excess × lendable / Σ lendable (Σ over every quota of the pool and flavor, the
  projects that ran nothing that hour included);
- *quota wait hours*: hours in which at least one of the project's jobs waited on quota;
- *idle* = capacity − used (not below 0) per hour; *idle while quota-waiting*: the idle of the
  hours (per pool and flavor) in which some project had a job waiting on quota.

Capacity is the one in force hour by hour (``PoolCapacity``'s history: each version holds
from its date until the next, time-weighted within the hour it changed; a deletion holds 0),
as GPU-hours over the window; instants before a capacity's first recorded version count at
today's capacity. Guarantee shares are against today's capacity.

**Exceptions** are the requests submitted in the window (requested; approved and rejected by
their stage now), per project and kind; an approved quota exception's GPU-hours are its extra
GPUs × its time box. Each approved one's *outcome* (``outcomes``): its project's jobs
submitted inside its time box and the window, their median wait and their most frequent tier
(the page sets it against that tier's median wait of the window). ``policy_monthly_limit`` is
the strictest ``monthly_flag_threshold`` of the approval policies; ``over_policy`` lists the
projects whose approved exceptions in one calendar month of the window exceed it.

**Preemptions** are the ``preempted`` events in the window: GPU-hours lost = GPUs × (the
preemption − the run's last start or resume); time to restart = the next start or resume −
the preemption (jobs not restarted yet are left out of its median); ``early`` counts the
preemptions before the class's minimum runtime (from the run's last start or resume).
*Failures* are jobs that ended in the window as failed, timed out, out of memory or on a
node failure; *requeues* the ``requeued`` events in the window. The preemption class is the
one of the job's quota.

**Timeline**: rule changes applied in the window and grants starting in it, by time.

Scope: ``pool`` limits jobs, hours and capacity to one pool (a job's pool is its project's
quota pool for its flavor, else its cluster's pool); ``project`` limits jobs, service rows
and exceptions to one project (capacity stays the pool's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count

from queues.models import WorkloadJob

from .. import _sql
from ._common import Names, Scope, iso, tables
from .exceptions import exceptions as _exceptions
from .preemptions import preemptions as _preemptions
from .service import service_and_capacity
from .timeline import timeline as _timeline
from .waits import shape_waits, wait_queries, waits_from_rows

__all__ = ["review_metrics", "review_metrics_by_project"]


def _settings() -> None:
    if _sql.is_postgres():
        with connection.cursor() as cursor:
            # Sorting a month of waits and hashing its groups in memory; no JIT: compiling
            # the plan costs more than running it; and index scans priced as the cached
            # reads they are (the review reads a window: the jobs, then their events by id).
            cursor.execute("SET LOCAL work_mem = '256MB'")
            # The planner prices each group's array at 8 kB and hashes every set only if they
            # fit: room for a few thousand groups (the arrays' real size is the window's waits
            # × the sets; beyond the limit the hash spills to disk, in order).
            cursor.execute("SET LOCAL hash_mem_multiplier = 8")
            cursor.execute("SET LOCAL jit = off")
            cursor.execute("SET LOCAL random_page_cost = 1.1")
            if settings.ARBITER_REVIEW_CONNECTIONS > 1:
                # The review's own connections already keep the CPUs busy: parallel workers
                # on top of them only contend (measured: slower builds).
                cursor.execute("SET LOCAL max_parallel_workers_per_gather = 0")


def _queries(
    scope: Scope, t: dict[str, str], names: Names, *, per_project: bool, split: bool = True
) -> list[tuple[str, Callable[[], Any]]]:
    """Every query of the review, named, the longest first (``run_all`` balances them so);
    ``_metrics`` reads their results by name (``bench/review.py`` times each alone). The
    waits' percentiles in two halves (``split``: on connections that run at once) or one."""
    percentiles = wait_queries(scope, t, names, per_project=per_project, split=split)
    waits = (
        [("waits_first_half", percentiles[0]), ("waits_second_half", percentiles[1])]
        if split
        else [("waits", percentiles[0])]
    )
    return [
        *waits,
        ("service_and_capacity", partial(service_and_capacity, scope, t, names)),
        ("preemptions", partial(_preemptions, scope, t, names)),
        ("exceptions", partial(_exceptions, scope, t, names)),
        ("timeline", partial(_timeline, scope)),
    ]


def _waits_not_recorded(scope: Scope) -> list[tuple[str, int | None, int]]:
    """(source, project id, jobs) submitted in the window whose source cannot tell their
    wait (``WorkloadJob.waits_recorded``): the review counts no wait for them and says so.
    One query of the jobs table by submit time."""
    jobs = WorkloadJob.objects.filter(
        submitted_at__gte=scope.start, submitted_at__lt=scope.end, waits_recorded=False
    )
    if scope.project_id is not None:
        jobs = jobs.filter(project_id=scope.project_id)
    return [
        (source, project_id, count)
        for source, project_id, count in jobs.order_by()
        .values_list("source", "project_id")
        .annotate(count=Count("pk"))
    ]


def _by_source(rows: Iterable[tuple[str, int | None, int]]) -> list[dict[str, Any]]:
    totals: dict[str, int] = {}
    for source, _project, count in rows:
        totals[source] = totals.get(source, 0) + count
    return [{"source": source, "jobs": jobs} for source, jobs in sorted(totals.items())]


def _metrics(
    *, start: datetime, end: datetime, pool: str | None, project: str | None, per_project: bool
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    scope = Scope(start=start, end=end, pool=pool, project=project)
    t = tables()
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        snapshot = _sql.snapshot_export(outermost=outermost)
        _settings()
        names = Names.load()
        # On PostgreSQL outside a transaction they run on several connections at once, all
        # reading this transaction's snapshot.
        # One connection sorts the window's waits once for every set; several, in two halves.
        queries = _queries(scope, t, names, per_project=per_project, split=snapshot is not None)
        results = _sql.run_all([task for _name, task in queries], snapshot=snapshot,
                               prepare=_settings)  # fmt: skip
        unrecorded = _waits_not_recorded(scope)
    by_name = dict(zip((name for name, _task in queries), results, strict=True))
    wait_rows = [row for name, rows in by_name.items() if name.startswith("wait") for row in rows]
    waits, project_waits = waits_from_rows(wait_rows, names, per_project)
    waits["not_recorded"] = _by_source(unrecorded)
    service, project_service, capacity = by_name["service_and_capacity"]
    exceptions, project_exceptions = by_name["exceptions"]
    preemptions, project_preemptions = by_name["preemptions"]
    timeline = by_name["timeline"]
    window = {
        "start": iso(start),
        "end": iso(end),
        "hours": round((end - start).total_seconds() / 3600, 2),
    }
    metrics = {
        "window": window,
        "scope": {"pool": pool, "project": project},
        "waits": waits,
        "service": service,
        "capacity": capacity,
        "exceptions": exceptions,
        "preemptions": preemptions,
        "timeline": timeline,
    }
    if not per_project:
        return metrics, {}
    views = _project_views(
        names=names,
        window=window,
        pool=pool,
        unrecorded=unrecorded,
        project_waits=project_waits,
        project_service=project_service,
        capacity=capacity,
        exceptions=exceptions,
        project_exceptions=project_exceptions,
        project_preemptions=project_preemptions,
        timeline=timeline,
    )
    return metrics, views


def _project_views(
    *,
    names: Names,
    window: dict[str, Any],
    pool: str | None,
    unrecorded: list[Any],
    project_waits: dict[Any, Any],
    project_service: dict[Any, Any],
    capacity: Any,
    exceptions: dict[str, Any],
    project_exceptions: dict[Any, Any],
    project_preemptions: dict[Any, Any],
    timeline: list[dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    """Each project's own view of the review: the projects it has numbers on (a service row or
    jobs in the window), each with its waits, service, exceptions, preemptions and grants."""
    # The projects the review has numbers on: a service row or jobs in the window.
    ids = [
        project_id
        for project_id in names.projects
        if project_id is not None
        and (
            project_id in project_service
            or project_id in project_waits
            or any(row[1] == project_id for row in unrecorded)
        )
    ]
    empty_waits = shape_waits({}, names)
    views: dict[str, dict[str, Any]] = {}
    for project_id in ids:
        item = names.projects[project_id]
        assert item is not None
        views[item.slug] = {
            "window": window,
            "scope": {"pool": pool, "project": item.slug},
            "waits": {
                **project_waits.get(project_id, empty_waits),
                "not_recorded": _by_source(row for row in unrecorded if row[1] == project_id),
            },
            "service": {"by_project": project_service.get(project_id, [])},
            "capacity": capacity,
            "exceptions": project_exceptions.get(
                project_id,
                {
                    "by_project_kind": [],
                    "policy_monthly_limit": exceptions["policy_monthly_limit"],
                    "over_policy": [],
                    "outcomes": [],
                },
            ),
            "preemptions": project_preemptions.get(project_id, _no_preemptions()),
            "timeline": [
                entry
                for entry in timeline
                if entry["kind"] != "grant" or entry["object"] == item.slug
            ],
        }
    return views


def _no_preemptions() -> dict[str, Any]:
    return {
        "total": {
            "count": 0,
            "gpu_hours_lost": 0.0,
            "restart_p50_seconds": None,
            "failures": 0,
            "requeues": 0,
        },
        "by_tier_class": [],
    }


def review_metrics(
    *, start: datetime, end: datetime, pool: str | None = None, project: str | None = None
) -> dict[str, Any]:
    """Every metric of the review for ``[start, end)``, overall and per pool, flavor, tier
    and project (see the module's docstring for each definition)."""
    metrics, _views = _metrics(start=start, end=end, pool=pool, project=project, per_project=False)
    return metrics


def review_metrics_by_project(
    *, start: datetime, end: datetime, pool: str | None = None
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``review_metrics`` of the window and, from the same queries (their number does not
    grow with the number of projects), each project's view: for every project with a service
    row or jobs in the window, what ``review_metrics`` gives with that project as scope.

    The views share the parts that are the same for every project (the window, the capacity,
    the timeline's entries) with each other and with the site's figures: JSON data to store
    or render, not to change in place (a deep copy per view cost 0.13 s with 100 views)."""
    return _metrics(start=start, end=end, pool=pool, project=None, per_project=True)
