"""The monthly review's metrics for a window (contract B between the reports helpers).

``review_metrics`` returns plain JSON data, every figure computed in the database (a fixed
number of queries, whatever the size of the window or of the history):

**Waits** read the jobs *submitted* in ``[start, end)`` (index ``job_submitted``, so the cost
follows the window). A job's wait is its first start − its submit; when it had not started by
the window's end it is censored: ``end − submit``, counted in ``waiting_at_end`` and in the
percentiles at that value (a starving project cannot look good). A job cancelled while
pending waits until its cancellation. ``over_threshold`` counts waits longer than the tier's
wait alert (``wait_alert_minutes``). Percentiles are continuous (``percentile_cont``).

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

Capacity is the pools' current capacity (``PoolCapacity``), as GPU-hours over the window.

**Exceptions** are the requests submitted in the window (requested; approved and rejected by
their stage now), per project and kind; an approved quota exception's GPU-hours are its extra
GPUs × its time box. ``policy_monthly_limit`` is the strictest ``monthly_flag_threshold`` of
the approval policies; ``over_policy`` lists the projects whose approved exceptions in one
calendar month of the window exceed it.

**Preemptions** are the ``preempted`` events in the window: GPU-hours lost = GPUs × (the
preemption − the run's last start or resume); time to restart = the next start or resume −
the preemption (jobs not restarted yet are left out of its median). *Failures* are jobs that
ended in the window as failed, timed out, out of memory or on a node failure; *requeues* the
``requeued`` events in the window. The preemption class is the one of the job's quota.

**Timeline**: rule changes applied in the window and grants starting in it, by time.

Scope: ``pool`` limits jobs, hours and capacity to one pool (a job's pool is its project's
quota pool for its flavor, else its cluster's pool); ``project`` limits jobs, service rows
and exceptions to one project (capacity stays the pool's).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils.translation import gettext as _

from approvals.models import ApprovalPolicy, RequestStage, UpgradeRequest
from governance.models import (
    ChangeStatus,
    GpuFlavor,
    Grant,
    GrantKind,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PriorityTier,
    Project,
    Quota,
    RuleChange,
    RuleEdit,
)
from queues.models import (
    Cluster,
    EventKind,
    JobState,
    WaitCategory,
    WorkloadEvent,
    WorkloadHour,
    WorkloadJob,
)

from . import _sql
from ._sql import (
    day_of,
    fetch,
    greatest,
    key_id,
    least,
    param,
    percentile_sets,
    seconds_between,
    ts,
)

FAILED_STATES = (JobState.FAILED, JobState.TIMEOUT, JobState.OUT_OF_MEMORY, JobState.NODE_FAIL)


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)


def _gh(seconds: float | None) -> float:
    """GPU-seconds as GPU-hours rounded to 0.01."""
    return round(float(seconds or 0) / 3600.0, 2)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def _wait_stats(row: tuple[Any, ...] | None) -> dict[str, Any]:
    """WaitStats from a ``percentile_sets`` row with extras (censored, over)."""
    if row is None:
        return {
            "jobs": 0,
            "waiting_at_end": 0,
            "p50": None,
            "p90": None,
            "p99": None,
            "max": None,
            "over_threshold": 0,
        }
    _gs, _k1, _k2, n, p50, p90, p99, high, censored, over = row
    return {
        "jobs": int(n),
        "waiting_at_end": int(censored or 0),
        "p50": _r(p50),
        "p90": _r(p90),
        "p99": _r(p99),
        "max": _r(high),
        "over_threshold": int(over or 0),
    }


def _capacity(available: float, allocated: float, idle: float, idle_waiting: float) -> dict:
    return {
        "available_gpu_hours": _gh(available),
        "allocated_gpu_hours": _gh(allocated),
        "idle_gpu_hours": _gh(idle),
        "idle_while_quota_waiting_gpu_hours": _gh(idle_waiting),
    }


class _Scope:
    """The window and scope as SQL parameters and filters."""

    def __init__(self, *, start: datetime, end: datetime, pool: str | None, project: str | None):
        self.start, self.end = start, end
        first_hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        self.hours = []
        hour = first_hour
        while hour < end:
            self.hours.append(hour)
            hour += timedelta(hours=1)
        self.pool_id: int | None = None
        self.project_id: int | None = None
        if pool is not None:
            self.pool_id = Pool.objects.filter(slug=pool).values_list("pk", flat=True).first() or -1
        if project is not None:
            self.project_id = (
                Project.objects.filter(slug=project).values_list("pk", flat=True).first() or -1
            )
        self.params: dict[str, Any] = {
            "start": param(start),
            "end": param(end),
            "hstart": param(first_hour),
            "pool": self.pool_id,
            "project": self.project_id,
        }


def _tables() -> dict[str, str]:
    return {
        "job": WorkloadJob._meta.db_table,
        "event": WorkloadEvent._meta.db_table,
        "hour": WorkloadHour._meta.db_table,
        "quota": Quota._meta.db_table,
        "capacity": PoolCapacity._meta.db_table,
        "tier": PriorityTier._meta.db_table,
        "cluster_pools": Cluster.pools.through._meta.db_table,
        "request": UpgradeRequest._meta.db_table,
    }


def _job_pool_ctes(t: dict[str, str]) -> str:
    """CTEs ``qp`` (project, flavor → quota pool and preemption class) and ``cp`` (cluster →
    pool): a job's pool is the quota's, else its cluster's."""
    return (
        f"qp AS (SELECT project_id, flavor_id, MIN(pool_id) AS pool_id, "
        f"MIN(preemption_class_id) AS class_id FROM {t['quota']} GROUP BY project_id, flavor_id), "
        f"cp AS (SELECT cluster_id, MIN(pool_id) AS pool_id FROM {t['cluster_pools']} "
        f"GROUP BY cluster_id)"
    )


# --- waits ---------------------------------------------------------------------------------

WAIT_SETS = (
    ("all", ()),
    ("tier", ("tier_id",)),
    ("project", ("project_id",)),
    ("pool", ("pool_id",)),
    ("flavor", ("flavor_id",)),
    ("day_tier", ("day", "tier_id")),
)


def _waits(scope: _Scope, t: dict[str, str]) -> dict[str, Any]:
    end = ts("end")
    first_start = (
        f"CASE WHEN j.preemptions > 0 OR j.requeues > 0 THEN COALESCE("
        f"(SELECT MIN(e.time) FROM {t['event']} e WHERE e.job_id = j.id "
        f"AND e.kind = '{EventKind.STARTED.value}'), j.started_at) ELSE j.started_at END"
    )
    filters = ""
    if scope.project_id is not None:
        filters += " AND j.project_id = %(project)s"
    pool_filter = " WHERE pool_id = %(pool)s" if scope.pool_id is not None else ""
    wait_end = (
        f"CASE WHEN started < {end} THEN started "
        f"WHEN started IS NULL AND ended_at < {end} THEN ended_at ELSE {end} END"
    )
    materialized = ""  # inlined: one materialization (wo) of a month of waits is enough
    ctes = (
        f"WITH {_job_pool_ctes(t)}, "
        f"j1 AS {materialized}(SELECT j.project_id, j.tier_id, j.flavor_id, "
        f"COALESCE(qp.pool_id, cp.pool_id) AS pool_id, j.category, j.submitted_at, "
        f"{first_start} AS started, j.ended_at, tr.wait_alert_minutes AS alert "
        f"FROM {t['job']} j LEFT JOIN qp ON qp.project_id = j.project_id "
        f"AND qp.flavor_id = j.flavor_id LEFT JOIN cp ON cp.cluster_id = j.cluster_id "
        f"LEFT JOIN {t['tier']} tr ON tr.id = j.tier_id "
        f"WHERE j.submitted_at >= {ts('start')} AND j.submitted_at < {end}{filters}), "
        f"w AS (SELECT project_id, tier_id, flavor_id, pool_id, category, "
        f"{day_of('submitted_at')} AS day, "
        f"{seconds_between(wait_end, 'submitted_at')} AS wait, "
        f"CASE WHEN started < {end} THEN 0 WHEN started IS NULL AND ended_at < {end} THEN 0 "
        f"ELSE 1 END AS censored, alert FROM j1{pool_filter}), "
        f"wo AS (SELECT w.*, CASE WHEN alert IS NOT NULL AND wait > alert * 60 THEN 1 ELSE 0 "
        f"END AS over_ FROM w) "
    )
    # One statement: the percentile sets, then the categories (count and total wait).
    rows = fetch(
        ctes
        + percentile_sets(
            source="wo", value="wait", sets=WAIT_SETS, extra=", SUM(censored), SUM(over_)"
        )
        + " UNION ALL SELECT 'category', category, NULL, COUNT(*), NULL, NULL, NULL, SUM(wait), "
        "NULL, NULL FROM wo GROUP BY category",
        scope.params,
    )
    by_set: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        by_set[row[0]].append(row)
    categories = [(row[1], row[3], row[7]) for row in by_set["category"]]

    tiers: dict[int | None, PriorityTier] = {tier.pk: tier for tier in PriorityTier.objects.all()}
    projects: dict[int | None, Project] = {
        project.pk: project for project in Project.objects.select_related("tier").all()
    }
    default_tier = next((tier for tier in tiers.values() if tier.is_default), None)
    pools: dict[int | None, Pool] = {pool.pk: pool for pool in Pool.objects.all()}
    flavors: dict[int | None, GpuFlavor] = {flavor.pk: flavor for flavor in GpuFlavor.objects.all()}

    def tier_rank(row: dict[str, Any]) -> tuple[int, int, str]:
        tier = tiers.get(row["_id"])
        return (1, 0, "") if tier is None else (0, -tier.score, tier.name)

    by_tier = []
    for row in by_set["tier"]:
        tier = tiers.get(key_id(row[1]))
        by_tier.append(
            {
                **_wait_stats(row),
                "tier": tier.slug if tier else None,
                "name": tier.name if tier else _("No tier"),
                "threshold_seconds": (
                    tier.wait_alert_minutes * 60
                    if tier is not None and tier.wait_alert_minutes is not None
                    else None
                ),
                "_id": key_id(row[1]),
            }
        )
    by_tier.sort(key=tier_rank)

    by_project = []
    for row in by_set["project"]:
        project = projects.get(key_id(row[1]))
        base = (project.tier or default_tier) if project else None
        by_project.append(
            {
                **_wait_stats(row),
                "project": project.slug if project else None,
                "name": project.name if project else _("No project"),
                "tier": base.slug if base else None,
            }
        )
    by_project.sort(
        key=lambda r: (r["p90"] is None, -(r["p90"] or 0), r["name"], r["project"] or "")
    )

    def named(rows: list[tuple[Any, ...]], objects: dict, key: str, none: str) -> list[dict]:
        out = []
        for row in rows:
            obj = objects.get(key_id(row[1]))
            out.append(
                {
                    **_wait_stats(row),
                    key: obj.slug if obj else None,
                    "name": obj.name if obj else none,
                }
            )
        out.sort(key=lambda r: (r[key] is None, r["name"]))
        return out

    daily = []
    for row in by_set["day_tier"]:
        tier = tiers.get(key_id(row[2]))
        stats = _wait_stats(row)
        daily.append(
            {
                "day": row[1],
                "tier": tier.slug if tier else None,
                "p50": stats["p50"],
                "p90": stats["p90"],
                "p99": stats["p99"],
                "jobs": stats["jobs"],
                "_rank": tier_rank({"_id": key_id(row[2])}),
            }
        )
    daily.sort(key=lambda r: (r["day"], r["_rank"]))
    for item in daily:
        del item["_rank"]
    for item in by_tier:
        del item["_id"]

    per_category = {(row[0] or WaitCategory.UNCLASSIFIED): row for row in categories}
    by_category = []
    for category in WaitCategory:
        counted = [row for key, row in per_category.items() if key == category.value]
        by_category.append(
            {
                "category": category.value,
                "label": str(category.label),
                "jobs": sum(int(row[1]) for row in counted),
                "wait_seconds": round(sum(float(row[2] or 0) for row in counted), 3),
            }
        )
    overall = by_set["all"][0] if by_set["all"] and by_set["all"][0][3] else None
    return {
        "overall": _wait_stats(overall),
        "by_tier": by_tier,
        "by_project": by_project,
        "by_pool": named(by_set["pool"], pools, "pool", _("No pool")),
        "by_flavor": named(by_set["flavor"], flavors, "flavor", _("No flavor")),
        "by_category": by_category,
        "daily_by_tier": daily,
    }


# --- service and capacity (from the hourly rollup) -----------------------------------------


def _hour_ctes(scope: _Scope, t: dict[str, str]) -> str:
    pool_filter = " AND pool_id = %(pool)s" if scope.pool_id is not None else ""
    quota_filter = " WHERE pool_id = %(pool)s" if scope.pool_id is not None else ""
    used, g, lend = "h.used", "COALESCE(q.g, 0)", "COALESCE(q.l, 0)"
    unguaranteed = greatest("0", "COALESCE(cap.c, 0) - COALESCE(qt.g, 0)")
    excess = greatest("0", f"hf.borrowed - {unguaranteed}")
    return (
        f"h AS (SELECT hour, pool_id, flavor_id, project_id, SUM(gpu_seconds) AS used, "
        f"SUM(quota_wait_seconds) AS qwait FROM {t['hour']} "
        f"WHERE hour >= {ts('hstart')} AND hour < {ts('end')}{pool_filter} "
        f"GROUP BY hour, pool_id, flavor_id, project_id), "
        f"q AS (SELECT project_id, pool_id, flavor_id, SUM(guarantee) * 3600.0 AS g, "
        f"SUM(CASE WHEN lending_limit IS NULL THEN guarantee ELSE lending_limit END) * 3600.0 "
        f"AS l FROM {t['quota']}{quota_filter} GROUP BY project_id, pool_id, flavor_id), "
        f"qt AS (SELECT pool_id, flavor_id, SUM(g) AS g, SUM(l) AS l FROM q "
        f"GROUP BY pool_id, flavor_id), "
        f"cap AS (SELECT pool_id, flavor_id, SUM(gpus) * 3600.0 AS c FROM {t['capacity']} "
        f"GROUP BY pool_id, flavor_id), "
        f"hp AS (SELECT h.hour, h.pool_id, h.flavor_id, h.project_id, h.used, h.qwait, "
        f"{g} AS g, {lend} AS l, {least(used, g)} AS within_, "
        f"{greatest('0', f'{used} - {g}')} AS borrowed, "
        f"{least(greatest('0', f'{g} - {used}'), lend)} AS lendable "
        f"FROM h LEFT JOIN q ON q.project_id = h.project_id AND q.pool_id = h.pool_id "
        f"AND q.flavor_id = h.flavor_id), "
        f"hf AS (SELECT hour, pool_id, flavor_id, SUM(used) AS used, SUM(borrowed) AS borrowed, "
        f"SUM(qwait) AS qwait, SUM(l - lendable) AS lend_gap FROM hp "
        f"GROUP BY hour, pool_id, flavor_id), "
        f"hf2 AS (SELECT hf.*, COALESCE(cap.c, 0) AS c, "
        f"COALESCE(qt.l, 0) - hf.lend_gap AS lendable_all, "
        f"{excess} AS excess FROM hf LEFT JOIN cap ON cap.pool_id = hf.pool_id "
        f"AND cap.flavor_id = hf.flavor_id LEFT JOIN qt ON qt.pool_id = hf.pool_id "
        f"AND qt.flavor_id = hf.flavor_id), "
        f"hf3 AS (SELECT hf2.*, CASE WHEN lendable_all > 0 THEN "
        f"{least('1.0', 'excess / lendable_all')} ELSE 0 END AS factor FROM hf2)"
    )


def _service_and_capacity(scope: _Scope, t: dict[str, str]) -> tuple[dict, dict]:
    ctes = "WITH " + _hour_ctes(scope, t) + " "

    # Per project, pool and flavor: used, within, borrowed, the lent correction over the hours
    # the project ran (factor × (l − lendable)), the hours waiting on quota.
    def f(value: str) -> str:
        return f"CAST({value} AS DOUBLE PRECISION)"

    capped_sql = f"SUM({least('used', 'c')})"
    idle_waiting_sql = f"SUM(CASE WHEN qwait > 0 THEN {greatest('0', 'c - used')} ELSE 0 END)"
    # One statement, four results told apart by their first column:
    # - "usage" per project, pool and flavor: used, within, borrowed;
    # - "lent" per project, pool and flavor: the lent correction over the hours the project
    #   ran (factor × (l − lendable));
    # - "factor" per pool and flavor: Σ factor over the hours (a project that ran nothing in
    #   an hour lent its whole lendable guarantee × factor);
    # - "qwait" per project and pool: hours with a job waiting on quota;
    # - "daily" per day, pool and flavor: used, used up to capacity, idle while quota-waiting.
    fetched = fetch(
        ctes + f"SELECT 'usage', NULL, project_id, pool_id, flavor_id, {f('SUM(used)')}, "
        f"{f('SUM(within_)')}, {f('SUM(borrowed)')}, NULL FROM hp "
        "GROUP BY project_id, pool_id, flavor_id "
        # Only the hours in which someone borrowed beyond the unguaranteed capacity (few).
        f"UNION ALL SELECT 'lent', NULL, hp.project_id, hp.pool_id, hp.flavor_id, NULL, NULL, "
        f"NULL, {f('SUM(hf3.factor * (hp.l - hp.lendable))')} FROM hf3 JOIN hp "
        "ON hp.hour = hf3.hour AND hp.pool_id = hf3.pool_id AND hp.flavor_id = hf3.flavor_id "
        "WHERE hf3.factor > 0 GROUP BY hp.project_id, hp.pool_id, hp.flavor_id "
        f"UNION ALL SELECT 'factor', NULL, NULL, pool_id, flavor_id, {f('SUM(factor)')}, NULL, "
        "NULL, NULL FROM hf3 GROUP BY pool_id, flavor_id "
        f"UNION ALL SELECT 'qwait', NULL, project_id, pool_id, NULL, {f('COUNT(*)')}, NULL, NULL, "
        "NULL FROM (SELECT hour, project_id, pool_id FROM h GROUP BY hour, project_id, pool_id "
        "HAVING SUM(qwait) > 0) AS waiting_ GROUP BY project_id, pool_id "
        f"UNION ALL SELECT 'daily', CAST({day_of('hour')} AS TEXT), NULL, pool_id, flavor_id, "
        f"{f('SUM(used)')}, {f(capped_sql)}, {f(idle_waiting_sql)}, NULL "
        f"FROM hf3 GROUP BY {day_of('hour')}, pool_id, flavor_id",
        scope.params,
    )
    results: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for line in fetched:
        results[line[0]].append(line[1:])
    usage = [(p, pool, fl, a, b, c, d) for _day, p, pool, fl, a, b, c, d in results["usage"]]
    usage += [(p, pool, fl, 0, 0, 0, d) for _day, p, pool, fl, _a, _b, _c, d in results["lent"]]
    factors = [(pool, fl, a) for _day, _p, pool, fl, a, _b, _c, _d in results["factor"]]
    quota_wait_hours = [(p, pool, a) for _day, p, pool, _fl, a, _b, _c, _d in results["qwait"]]
    daily = [(day, pool, fl, a, b, c) for day, _p, pool, fl, a, b, c, _d in results["daily"]]

    n_hours = len(scope.hours)
    quotas = list(
        Quota.objects.filter(
            **({"pool_id": scope.pool_id} if scope.pool_id is not None else {})
        ).values("project_id", "pool_id", "flavor_id", "guarantee", "lending_limit")
    )
    capacities = list(
        PoolCapacity.objects.filter(
            **({"pool_id": scope.pool_id} if scope.pool_id is not None else {})
        ).values("pool_id", "flavor_id", "gpus")
    )
    factor_sum = {(pool, flavor): float(total or 0) for pool, flavor, total in factors}

    # Service rows per (project, pool), flavors summed.
    rows: dict[tuple[Any, Any], dict[str, float]] = defaultdict(
        lambda: defaultdict(float)  # type: ignore[arg-type]
    )
    for quota in quotas:
        key = (quota["project_id"], quota["pool_id"])
        lendable = (
            quota["lending_limit"] if quota["lending_limit"] is not None else quota["guarantee"]
        )
        rows[key]["guarantee"] += quota["guarantee"]
        rows[key]["lent"] += (
            lendable * 3600.0 * factor_sum.get((quota["pool_id"], quota["flavor_id"]), 0.0)
        )
    for project_id, pool_id, _flavor_id, used, within, borrowed, correction in usage:
        row = rows[(project_id, pool_id)]
        row["used"] += float(used or 0)
        row["within"] += float(within or 0)
        row["borrowed"] += float(borrowed or 0)
        row["lent"] -= float(correction or 0)
    waits = {(project, pool): int(count) for project, pool, count in quota_wait_hours}
    pool_used: dict[Any, float] = defaultdict(float)
    for (_project_id, pool_id), row in rows.items():
        pool_used[pool_id] += row["used"]
    pool_capacity: dict[Any, int] = defaultdict(int)
    for item in capacities:
        pool_capacity[item["pool_id"]] += item["gpus"]

    projects = {project.pk: project for project in Project.objects.all()}
    pools = {pool.pk: pool for pool in Pool.objects.all()}
    flavors = {flavor.pk: flavor for flavor in GpuFlavor.objects.all()}
    service: list[dict[str, Any]] = []
    for (project_id, pool_id), row in rows.items():
        if project_id is None:
            continue
        if scope.project_id is not None and project_id != scope.project_id:
            continue
        project = projects[project_id]
        pool = pools.get(pool_id)
        guarantee = int(row["guarantee"])
        service.append(
            {
                "project": project.slug,
                "name": project.name,
                "pool": pool.slug if pool else None,
                "gpu_hours": _gh(row["used"]),
                "share": round(row["used"] / pool_used[pool_id], 4) if pool_used[pool_id] else 0.0,
                "guarantee_gpus": guarantee,
                "guarantee_share": (
                    round(guarantee / pool_capacity[pool_id], 4) if pool_capacity[pool_id] else 0.0
                ),
                "guaranteed_gpu_hours": round(guarantee * n_hours, 2),
                "within_guarantee_gpu_hours": _gh(row["within"]),
                "borrowed_gpu_hours": _gh(row["borrowed"]),
                "lent_gpu_hours": _gh(max(0.0, row["lent"])),
                "quota_wait_hours": float(waits.get((project_id, pool_id), 0)),
            }
        )
    service.sort(key=lambda r: (-float(r["gpu_hours"]), str(r["name"]), str(r["pool"] or "")))

    # Capacity.
    cap = {(c["pool_id"], c["flavor_id"]): c["gpus"] for c in capacities}
    keys = set(cap)
    per_key: dict[tuple[Any, Any], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    per_day: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for day, pool_id, flavor_id, used, used_capped, idle_waiting in daily:
        if pool_id is None or flavor_id is None:
            continue
        keys.add((pool_id, flavor_id))
        for target in (per_key[(pool_id, flavor_id)], per_day[day]):
            target[0] += float(used or 0)
            target[1] += float(used_capped or 0)
            target[2] += float(idle_waiting or 0)
    total_gpus = sum(cap.values())
    by_pool_flavor = []
    totals = [0.0, 0.0, 0.0, 0.0]
    for pool_id, flavor_id in keys:
        available = cap.get((pool_id, flavor_id), 0) * 3600.0 * n_hours
        used, capped, idle_waiting = per_key[(pool_id, flavor_id)]
        idle = max(0.0, available - capped)
        for i, value in enumerate((available, used, idle, idle_waiting)):
            totals[i] += value
        pool, flavor = pools[pool_id], flavors[flavor_id]
        by_pool_flavor.append(
            {
                **_capacity(available, used, idle, idle_waiting),
                "pool": pool.slug,
                "flavor": flavor.slug,
                "pool_name": pool.name,
                "flavor_name": flavor.name,
            }
        )
    by_pool_flavor.sort(key=lambda r: (r["pool_name"], r["flavor_name"]))
    hours_per_day: dict[str, int] = defaultdict(int)
    for hour in scope.hours:
        hours_per_day[hour.strftime("%Y-%m-%d")] += 1
    days = []
    for day in sorted(hours_per_day):
        available = total_gpus * 3600.0 * hours_per_day[day]
        used, capped, idle_waiting = per_day.get(day, [0.0, 0.0, 0.0])
        days.append(
            {
                "day": day,
                "available_gpu_hours": _gh(available),
                "allocated_gpu_hours": _gh(used),
                "idle_gpu_hours": _gh(max(0.0, available - capped)),
                "idle_while_quota_waiting_gpu_hours": _gh(idle_waiting),
            }
        )
    capacity: dict[str, Any] = {
        "total": _capacity(*totals),
        "by_pool_flavor": by_pool_flavor,
        "daily": days,
    }
    return {"by_project": service}, capacity


# --- exceptions -----------------------------------------------------------------------------


def _exceptions(scope: _Scope, t: dict[str, str]) -> dict[str, Any]:
    filters = ""
    if scope.project_id is not None:
        filters += " AND r.project_id = %(project)s"
    if scope.pool_id is not None:
        filters += (
            f" AND (r.pool_id = %(pool)s OR (r.pool_id IS NULL AND r.project_id IN "
            f"(SELECT project_id FROM {t['quota']} WHERE pool_id = %(pool)s)))"
        )
    approved = f"r.stage = '{RequestStage.APPROVED.value}'"
    hours = seconds_between("r.ends_at", "r.starts_at") + " / 3600.0"
    rows = fetch(
        f"SELECT r.project_id, r.kind, COUNT(*), SUM(CASE WHEN {approved} THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN r.stage = '{RequestStage.REJECTED.value}' THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN {approved} AND r.kind = '{GrantKind.QUOTA_EXCEPTION.value}' "
        f"THEN COALESCE(r.extra_gpus, 0) * {hours} ELSE 0 END) "
        f"FROM {t['request']} r WHERE r.submitted_at >= {ts('start')} "
        f"AND r.submitted_at < {ts('end')}{filters} GROUP BY r.project_id, r.kind",
        scope.params,
    )
    monthly = fetch(
        f"SELECT r.project_id, substr(CAST({day_of('r.decided_at')} AS TEXT), 1, 7), COUNT(*) "
        f"FROM {t['request']} r WHERE {approved} AND r.decided_at >= {ts('start')} "
        f"AND r.decided_at < {ts('end')}{filters} "
        f"GROUP BY r.project_id, substr(CAST({day_of('r.decided_at')} AS TEXT), 1, 7)",
        scope.params,
    )
    projects = {project.pk: project for project in Project.objects.all()}
    labels = dict(GrantKind.choices)
    by_kind = []
    for project_id, kind, requested, approved_n, rejected, gpu_seconds_h in rows:
        project = projects[project_id]
        by_kind.append(
            {
                "project": project.slug,
                "name": project.name,
                "kind": kind,
                "kind_label": str(labels.get(kind, kind)),
                "requested": int(requested),
                "approved": int(approved_n or 0),
                "rejected": int(rejected or 0),
                "gpu_hours": round(float(gpu_seconds_h or 0), 2),
            }
        )
    by_kind.sort(key=lambda r: (r["name"], r["kind"]))
    limits = [
        value
        for value in ApprovalPolicy.objects.values_list("monthly_flag_threshold", flat=True)
        if value is not None
    ]
    limit = min(limits) if limits else None
    worst: dict[int, int] = defaultdict(int)
    for project_id, _month, count in monthly:
        worst[project_id] = max(worst[project_id], int(count))
    over: list[dict[str, Any]] = []
    if limit is not None:
        for project_id, count in worst.items():
            if count > limit:
                project = projects[project_id]
                over.append(
                    {"project": project.slug, "name": project.name, "count": count, "limit": limit}
                )
    over.sort(key=lambda r: (-int(r["count"]), str(r["name"])))
    return {"by_project_kind": by_kind, "policy_monthly_limit": limit, "over_policy": over}


# --- preemptions ----------------------------------------------------------------------------


def _preemptions(scope: _Scope, t: dict[str, str]) -> dict[str, Any]:
    filters = ""
    if scope.project_id is not None:
        filters += " AND j.project_id = %(project)s"
    pool_filter = " WHERE pool_id = %(pool)s" if scope.pool_id is not None else ""
    runs = f"('{EventKind.STARTED.value}', '{EventKind.RESUMED.value}')"
    ctes = (
        f"WITH {_job_pool_ctes(t)}, "
        f"pe AS (SELECT e.time, j.gpus, j.tier_id, qp.class_id, "
        f"COALESCE(qp.pool_id, cp.pool_id) AS pool_id, "
        f"(SELECT MAX(s.time) FROM {t['event']} s WHERE s.job_id = e.job_id "
        f"AND s.kind IN {runs} AND s.time <= e.time) AS run_from, "
        f"(SELECT MIN(s.time) FROM {t['event']} s WHERE s.job_id = e.job_id "
        f"AND s.kind IN {runs} AND s.time > e.time) AS restart "
        f"FROM {t['event']} e JOIN {t['job']} j ON j.id = e.job_id "
        f"LEFT JOIN qp ON qp.project_id = j.project_id AND qp.flavor_id = j.flavor_id "
        f"LEFT JOIN cp ON cp.cluster_id = j.cluster_id "
        f"WHERE e.kind = '{EventKind.PREEMPTED.value}' AND e.time >= {ts('start')} "
        f"AND e.time < {ts('end')}{filters}), "
        f"p AS (SELECT tier_id, class_id, "
        f"COALESCE(gpus * {seconds_between('time', 'run_from')}, 0) AS lost, "
        f"{seconds_between('restart', 'time')} AS restart_s FROM pe{pool_filter}), "
        f"pr AS (SELECT * FROM p WHERE restart_s IS NOT NULL) "
    )
    counts = fetch(
        ctes + "SELECT tier_id, class_id, COUNT(*), SUM(lost) FROM p GROUP BY tier_id, class_id",
        scope.params,
    )
    medians = fetch(
        ctes
        + percentile_sets(
            source="pr", value="restart_s", sets=(("all", ()), ("tc", ("tier_id", "class_id")))
        ),
        scope.params,
    )
    failed = ", ".join(f"'{state.value}'" for state in FAILED_STATES)
    job_scope = (
        f"JOIN {t['job']} j ON j.id = e.job_id LEFT JOIN qp ON qp.project_id = j.project_id "
        f"AND qp.flavor_id = j.flavor_id LEFT JOIN cp ON cp.cluster_id = j.cluster_id "
        f"WHERE e.time >= {ts('start')} AND e.time < {ts('end')}{filters}"
        + (" AND COALESCE(qp.pool_id, cp.pool_id) = %(pool)s" if scope.pool_id is not None else "")
    )
    (failures, requeues), *_ = fetch(
        f"WITH {_job_pool_ctes(t)} SELECT "
        f"SUM(CASE WHEN e.kind = '{EventKind.ENDED.value}' AND e.state IN ({failed}) "
        f"THEN 1 ELSE 0 END), SUM(CASE WHEN e.kind = '{EventKind.REQUEUED.value}' THEN 1 "
        f"ELSE 0 END) FROM {t['event']} e {job_scope} "
        f"AND (e.kind = '{EventKind.REQUEUED.value}' "
        f"OR (e.kind = '{EventKind.ENDED.value}' AND e.state IN ({failed})))",
        scope.params,
    )
    median = {
        (key_id(row[1]), key_id(row[2])) if row[0] == "tc" else "all": row[4] for row in medians
    }
    tiers = {tier.pk: tier for tier in PriorityTier.objects.all()}
    classes = {item.pk: item for item in PreemptionClass.objects.all()}
    by_tier_class = []
    total_count, total_lost = 0, 0.0
    for tier_id, class_id, count, lost in counts:
        tier, klass = tiers.get(tier_id), classes.get(class_id)
        total_count += int(count)
        total_lost += float(lost or 0)
        by_tier_class.append(
            {
                "tier": tier.slug if tier else None,
                "preemption_class": klass.slug if klass else None,
                "count": int(count),
                "gpu_hours_lost": _gh(lost),
                "restart_p50_seconds": _r(median.get((tier_id, class_id))),
                "_rank": (tier is None, -(tier.score if tier else 0), klass.slug if klass else ""),
            }
        )
    by_tier_class.sort(key=lambda r: r["_rank"])  # type: ignore[arg-type,return-value]
    for item in by_tier_class:
        del item["_rank"]
    return {
        "total": {
            "count": total_count,
            "gpu_hours_lost": _gh(total_lost),
            "restart_p50_seconds": _r(median.get("all")),
            "failures": int(failures or 0),
            "requeues": int(requeues or 0),
        },
        "by_tier_class": by_tier_class,
    }


# --- timeline -------------------------------------------------------------------------------


def _timeline(scope: _Scope) -> list[dict[str, Any]]:
    changes = list(
        RuleChange.objects.filter(
            status__in=[ChangeStatus.APPLIED, ChangeStatus.ROLLED_BACK],
            applied_at__gte=scope.start,
            applied_at__lt=scope.end,
        ).only("pk", "title", "applied_at")
    )
    edited: dict[int, set[str]] = defaultdict(set)
    for change_id, model in RuleEdit.objects.filter(
        change__in=[change.pk for change in changes]
    ).values_list("change_id", "content_type__model"):
        edited[change_id].add(model)
    items = [
        {
            "at": _iso(change.applied_at),  # type: ignore[arg-type]
            "kind": "change",
            "title": change.display_title,
            "object": ", ".join(sorted(edited[change.pk])),
            "id": change.pk,
        }
        for change in changes
    ]
    grants = Grant.objects.filter(starts_at__gte=scope.start, starts_at__lt=scope.end)
    if scope.project_id is not None:
        grants = grants.filter(project_id=scope.project_id)
    for grant in grants.select_related("project"):
        items.append(
            {
                "at": _iso(grant.starts_at),
                "kind": "grant",
                "title": f"{grant.get_kind_display()} · {grant.project.name}",
                "object": grant.project.slug,
                "id": grant.pk,
            }
        )
    items.sort(key=lambda item: (item["at"], item["kind"], item["id"]))
    return items


def review_metrics(
    *, start: datetime, end: datetime, pool: str | None = None, project: str | None = None
) -> dict[str, Any]:
    """Every metric of the review for ``[start, end)``, overall and per pool, flavor, tier
    and project (see the module's docstring for each definition)."""
    scope = _Scope(start=start, end=end, pool=pool, project=project)
    t = _tables()
    with transaction.atomic():
        if _sql.is_postgres():
            with connection.cursor() as cursor:
                # Sorting a month of waits in memory; and no JIT: compiling the plan costs
                # more than running it (the estimates of the per-job subqueries are high).
                cursor.execute("SET LOCAL work_mem = '256MB'")
                cursor.execute("SET LOCAL jit = off")
        waits = _waits(scope, t)
        service, capacity = _service_and_capacity(scope, t)
        exceptions = _exceptions(scope, t)
        preemptions = _preemptions(scope, t)
        timeline = _timeline(scope)
    return {
        "window": {
            "start": _iso(start),
            "end": _iso(end),
            "hours": round((end - start).total_seconds() / 3600, 2),
        },
        "scope": {"pool": pool, "project": project},
        "waits": waits,
        "service": service,
        "capacity": capacity,
        "exceptions": exceptions,
        "preemptions": preemptions,
        "timeline": timeline,
    }
