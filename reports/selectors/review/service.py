"""Service against guarantees, borrowing, lending and capacity, from the hourly rollup
``queues.WorkloadHour`` (never the jobs): per hour, project, pool and flavor. Sums are taken
in double precision (integer GPU-seconds, exact far beyond a year of a large pool), not
``numeric``, which PostgreSQL computes several times slower."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from governance.models import PoolCapacity, Quota

from .._sql import day_of, fetch, greatest, least, param, ts
from ._common import Names, Scope, gh

F = "DOUBLE PRECISION"


def _capacity(available: float, allocated: float, idle: float, idle_waiting: float) -> dict:
    return {
        "available_gpu_hours": gh(available),
        "allocated_gpu_hours": gh(allocated),
        "idle_gpu_hours": gh(idle),
        "idle_while_quota_waiting_gpu_hours": gh(idle_waiting),
    }


def _capacity_in_force(
    scope: Scope, capacities: Sequence[Mapping[str, Any]]
) -> dict[tuple[int, int], list[float]]:
    """Per pool and flavor, the GPU-seconds of capacity in force in each hour of the scope,
    read from the capacity's history (``HistoricalPoolCapacity``: each version holds from its
    date until the next; a deletion holds 0), time-weighted within an hour when it changed.
    Instants before a capacity's first recorded version count at today's capacity (rules
    entered after the fact, e.g. set up after the evidence they govern)."""
    pool = {"pool_id": scope.pool_id} if scope.pool_id is not None else {}
    current = {(row["pool_id"], row["flavor_id"]): row["gpus"] for row in capacities}
    versions: dict[tuple[int, int], list[tuple[datetime, float]]] = defaultdict(list)
    history = PoolCapacity.history.model.objects.filter(  # type: ignore[attr-defined]
        history_date__lt=scope.end, **pool
    ).order_by("history_date", "history_id")
    for row in history.values("pool_id", "flavor_id", "gpus", "history_type", "history_date"):
        gpus = 0 if row["history_type"] == "-" else row["gpus"]
        versions[(row["pool_id"], row["flavor_id"])].append((row["history_date"], float(gpus)))
    hourly: dict[tuple[int, int], list[float]] = {}
    for key in set(current) | set(versions):
        changes = versions.get(key, [])
        # The value at each instant: the last version at or before it, else today's.
        points = [(datetime.min.replace(tzinfo=UTC), float(current.get(key, 0))), *changes]
        seconds = []
        at = 0
        for hour in scope.hours:
            until = hour + timedelta(hours=1)
            while at + 1 < len(points) and points[at + 1][0] <= hour:
                at += 1
            total, moment, value, step = 0.0, hour, points[at][1], at
            while step + 1 < len(points) and points[step + 1][0] < until:
                step += 1
                total += value * (points[step][0] - moment).total_seconds()
                moment, value = points[step][0], points[step][1]
            seconds.append(total + value * (until - moment).total_seconds())
        hourly[key] = seconds
    return hourly


def _segments_cte(scope: Scope, hourly: dict[tuple[int, int], list[float]]) -> str:
    """The CTE ``cap(pool_id, flavor_id, h0, h1, c)``: the capacity in GPU-seconds per hour
    over [h0, h1), one row per run of equal hours (one per pool and flavor unless the
    capacity changed in the window); its values join the scope's parameters."""
    rows = ["(NULL, NULL, NULL, NULL, 0.0)"]  # typed even when there is no capacity
    hours = [*scope.hours, scope.hours[-1] + timedelta(hours=1)] if scope.hours else []
    for n, ((pool_id, flavor_id), seconds) in enumerate(sorted(hourly.items())):
        first = 0
        for i in range(1, len(seconds) + 1):
            if i < len(seconds) and seconds[i] == seconds[first]:
                continue
            name = f"cap{n}_{first}"
            scope.params.update(
                {
                    f"{name}_p": pool_id,
                    f"{name}_f": flavor_id,
                    f"{name}_a": param(hours[first]),
                    f"{name}_b": param(hours[i]),
                    f"{name}_c": seconds[first],
                }
            )
            rows.append(
                f"(%({name}_p)s, %({name}_f)s, {ts(name + '_a')}, {ts(name + '_b')}, "
                f"CAST(%({name}_c)s AS {F}))"
            )
            first = i
    return f"cap(pool_id, flavor_id, h0, h1, c) AS (VALUES {', '.join(rows)})"


def _hour_ctes(scope: Scope, t: dict[str, str], segments: str) -> str:
    pool_filter = " AND pool_id = %(pool)s" if scope.pool_id is not None else ""
    quota_filter = " WHERE pool_id = %(pool)s" if scope.pool_id is not None else ""
    used, g, lend = "h.used", "COALESCE(q.g, 0)", "COALESCE(q.l, 0)"
    unguaranteed = greatest("0", "COALESCE(cap.c, 0) - COALESCE(qt.g, 0)")
    excess = greatest("0", f"hf.borrowed - {unguaranteed}")
    return (
        f"h AS (SELECT hour, pool_id, flavor_id, project_id, "
        f"SUM(CAST(gpu_seconds AS {F})) AS used, "
        f"SUM(CAST(quota_wait_seconds AS {F})) AS qwait, "
        f"SUM(CAST(resource_wait_seconds AS {F})) AS rwait FROM {t['hour']} "
        f"WHERE hour >= {ts('hstart')} AND hour < {ts('end')}{pool_filter} "
        f"GROUP BY hour, pool_id, flavor_id, project_id), "
        f"q AS (SELECT project_id, pool_id, flavor_id, CAST(SUM(guarantee) AS {F}) * 3600 AS g, "
        f"CAST(SUM(CASE WHEN lending_limit IS NULL THEN guarantee ELSE lending_limit END) AS {F}) "
        f"* 3600 "
        f"AS l FROM {t['quota']}{quota_filter} GROUP BY project_id, pool_id, flavor_id), "
        f"qt AS (SELECT pool_id, flavor_id, SUM(g) AS g, SUM(l) AS l FROM q "
        f"GROUP BY pool_id, flavor_id), "
        f"{segments}, "
        f"hp AS (SELECT h.hour, h.pool_id, h.flavor_id, h.project_id, h.used, h.qwait, h.rwait, "
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
        f"AND cap.flavor_id = hf.flavor_id AND hf.hour >= cap.h0 AND hf.hour < cap.h1 "
        f"LEFT JOIN qt ON qt.pool_id = hf.pool_id "
        f"AND qt.flavor_id = hf.flavor_id), "
        f"hf3 AS (SELECT hf2.*, CASE WHEN lendable_all > 0 THEN "
        f"{least('1.0', 'excess / lendable_all')} ELSE 0 END AS factor FROM hf2)"
    )


# A replay's rules (``reports.selectors.change_replay``): the capacities (``PoolCapacity``'s
# columns), their GPU-seconds in each hour of the scope, and the quotas (``Quota``'s).
GivenRules = tuple[list[dict[str, Any]], dict[tuple[int, int], list[float]], list[dict[str, Any]]]


def service_and_capacity(
    scope: Scope, t: dict[str, str], names: Names, *, given: GivenRules | None = None
) -> tuple[dict[str, Any], dict[int, list[dict[str, Any]]], dict[str, Any]]:
    """The service rows (and the same per project id: a project's view keeps the lending
    computed against every project of the pool) and the capacity. ``given``: the capacity and
    quotas to measure against instead of ``PoolCapacity``, its history and ``Quota`` (a
    replay's rules; ``t["quota"]`` then reads the same quotas)."""
    capacities: Sequence[Mapping[str, Any]]
    if given is None:
        capacities = list(
            PoolCapacity.objects.filter(
                **({"pool_id": scope.pool_id} if scope.pool_id is not None else {})
            ).values("pool_id", "flavor_id", "gpus")
        )
        hourly, quotas = _capacity_in_force(scope, capacities), None
    else:
        capacities, hourly, quotas = given
    results = _hour_sums(scope, t, hourly)
    service, per_project = _service(scope, names, capacities, results, quotas)
    capacity = _capacity_of(scope, names, capacities, hourly, results)
    return {"by_project": service}, per_project, capacity


def _hour_sums(
    scope: Scope, t: dict[str, str], hourly: dict[tuple[int, int], list[float]]
) -> dict[str, list[tuple[Any, ...]]]:
    """The rollup's sums in one statement, its rows by result ("usage", "lent", "factor",
    "qwait", "daily"), each row without its first column."""
    ctes = "WITH " + _hour_ctes(scope, t, _segments_cte(scope, hourly)) + " "

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
    # - "qwait" per project and pool: hours with a job waiting on quota, and the hours in
    #   which a job waited for resources (the pool had no free GPUs) of a flavor the project
    #   ran below its guarantee of (its guarantee not honoured: the "starved" hours);
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
        f"UNION ALL SELECT 'qwait', NULL, project_id, pool_id, NULL, {f('SUM(quota_)')}, "
        f"{f('SUM(starved_)')}, NULL, NULL FROM (SELECT hour, project_id, pool_id, "
        "MAX(CASE WHEN qwait > 0 THEN 1 ELSE 0 END) AS quota_, "
        "MAX(CASE WHEN rwait > 0 AND used < g THEN 1 ELSE 0 END) AS starved_ FROM hp "
        "WHERE qwait > 0 OR rwait > 0 GROUP BY hour, project_id, pool_id) AS waiting_ "
        "GROUP BY project_id, pool_id "
        f"UNION ALL SELECT 'daily', CAST({day_of('hour')} AS TEXT), NULL, pool_id, flavor_id, "
        f"{f('SUM(used)')}, {f(capped_sql)}, {f(idle_waiting_sql)}, NULL "
        f"FROM hf3 GROUP BY {day_of('hour')}, pool_id, flavor_id "
        # "overcap" per pool: the hours in which its jobs ran more GPUs than the pool holds
        # (its flavors summed, jobs of no flavor included), and the largest ratio.
        f"UNION ALL SELECT 'overcap', NULL, NULL, pool_id, NULL, {f('COUNT(*)')}, "
        f"{f('MAX(CASE WHEN capsum > 0 THEN u / capsum END)')}, NULL, NULL FROM ("
        "SELECT hu.pool_id, hu.u, (SELECT SUM(cap.c) FROM cap WHERE cap.pool_id = hu.pool_id "
        "AND hu.hour >= cap.h0 AND hu.hour < cap.h1) AS capsum FROM (SELECT hour, pool_id, "
        "SUM(used) AS u FROM h WHERE pool_id IS NOT NULL GROUP BY hour, pool_id) AS hu"
        ") AS pool_hours_ WHERE u > COALESCE(capsum, 0) + 1 GROUP BY pool_id",
        scope.params,
    )
    results: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for line in fetched:
        results[line[0]].append(line[1:])
    return results


def _service_sums(
    scope: Scope,
    results: dict[str, list[tuple[Any, ...]]],
    given: list[dict[str, Any]] | None = None,
) -> dict[tuple[Any, Any], dict[str, float]]:
    """Per (project, pool), flavors summed: the guarantee, and the GPU-seconds used, within
    the guarantee, borrowed and lent (against the ``given`` quotas, else ``Quota``'s)."""
    usage = [(p, pool, fl, a, b, c, d) for _day, p, pool, fl, a, b, c, d in results["usage"]]
    usage += [(p, pool, fl, 0, 0, 0, d) for _day, p, pool, fl, _a, _b, _c, d in results["lent"]]
    factors = [(pool, fl, a) for _day, _p, pool, fl, a, _b, _c, _d in results["factor"]]
    quotas = (
        given
        if given is not None
        else list(
            Quota.objects.filter(
                **({"pool_id": scope.pool_id} if scope.pool_id is not None else {})
            ).values("project_id", "pool_id", "flavor_id", "guarantee", "lending_limit")
        )
    )
    factor_sum = {(pool, flavor): float(total or 0) for pool, flavor, total in factors}
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
    return rows


def _service(
    scope: Scope,
    names: Names,
    capacities: Sequence[Mapping[str, Any]],
    results: dict[str, list[tuple[Any, ...]]],
    quotas: list[dict[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]]]:
    """The service rows of the scope's projects, and the same per project id."""
    rows = _service_sums(scope, results, quotas)
    n_hours = len(scope.hours)
    waits = {(p, pool): int(a or 0) for _day, p, pool, _fl, a, _b, _c, _d in results["qwait"]}
    starved = {(p, pool): int(b or 0) for _day, p, pool, _fl, _a, b, _c, _d in results["qwait"]}
    pool_used: dict[Any, float] = defaultdict(float)
    for (_project_id, pool_id), row in rows.items():
        pool_used[pool_id] += row["used"]
    pool_capacity: dict[Any, int] = defaultdict(int)
    for capacity_row in capacities:
        pool_capacity[capacity_row["pool_id"]] += capacity_row["gpus"]

    projects, pools = names.projects, names.pools
    service: list[dict[str, Any]] = []
    per_project: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for (project_id, pool_id), row in rows.items():
        if project_id is None:
            continue
        if scope.project_id is not None and project_id != scope.project_id:
            continue
        project = projects[project_id]
        pool = pools.get(pool_id)
        guarantee = int(row["guarantee"])
        item: dict[str, Any] = {
            "project": project.slug,
            "name": project.name,
            "pool": pool.slug if pool else None,
            "gpu_hours": gh(row["used"]),
            "share": round(row["used"] / pool_used[pool_id], 4) if pool_used[pool_id] else 0.0,
            "guarantee_gpus": guarantee,
            "guarantee_share": (
                round(guarantee / pool_capacity[pool_id], 4) if pool_capacity[pool_id] else 0.0
            ),
            "guaranteed_gpu_hours": round(guarantee * n_hours, 2),
            "within_guarantee_gpu_hours": gh(row["within"]),
            "borrowed_gpu_hours": gh(row["borrowed"]),
            "lent_gpu_hours": gh(max(0.0, row["lent"])),
            "quota_wait_hours": float(waits.get((project_id, pool_id), 0)),
            "resource_wait_below_guarantee_hours": float(starved.get((project_id, pool_id), 0)),
        }
        service.append(item)
        per_project[project_id].append(item)
    for items in (service, *per_project.values()):
        items.sort(key=lambda r: (-float(r["gpu_hours"]), str(r["name"]), str(r["pool"] or "")))
    return service, per_project


def _capacity_of(
    scope: Scope,
    names: Names,
    capacities: Sequence[Mapping[str, Any]],
    hourly: dict[tuple[int, int], list[float]],
    results: dict[str, list[tuple[Any, ...]]],
) -> dict[str, Any]:
    """Capacity: the GPU-seconds in force each hour (from the rules' history), in total, per
    pool and flavor and per day, against the GPU-seconds used; the pools used above it."""
    daily = [(day, pool, fl, a, b, c) for day, _p, pool, fl, a, b, c, _d in results["daily"]]
    keys = {key for key, seconds in hourly.items() if any(seconds)}
    keys |= {(c["pool_id"], c["flavor_id"]) for c in capacities}
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
    by_pool_flavor, totals = _capacity_by_pool_flavor(names, hourly, keys, per_key)
    return {
        "total": _capacity(*totals),
        "by_pool_flavor": by_pool_flavor,
        "daily": _capacity_days(scope, hourly, per_day),
        "over_capacity": _over_capacity(names, hourly, results),
    }


def _over_capacity(
    names: Names,
    hourly: dict[tuple[int, int], list[float]],
    results: dict[str, list[tuple[Any, ...]]],
) -> list[dict[str, Any]]:
    """The pools whose jobs ran more GPUs than the pool holds in at least one hour: more
    than can be true (the evidence or the declared capacity is wrong). Per pool, its flavors
    summed and jobs of no flavor included: the GPU-hours used and available in the window,
    the hours over capacity and the largest ratio of used to held in an hour (none when the
    pool declares no capacity)."""
    used: dict[Any, float] = defaultdict(float)
    for _day, _project, pool_id, _flavor, seconds, *_rest in results["usage"]:
        used[pool_id] += float(seconds or 0)
    available: dict[Any, float] = defaultdict(float)
    for (pool_id, _flavor_id), seconds in hourly.items():
        available[pool_id] += sum(seconds)
    rows: list[dict[str, Any]] = []
    for _day, _project, pool_id, _flavor, hours, peak, *_rest in results["overcap"]:
        pool = names.pools.get(pool_id)
        if pool is None:
            continue
        rows.append(
            {
                "pool": pool.slug,
                "pool_name": pool.name,
                "used_gpu_hours": gh(used[pool_id]),
                "available_gpu_hours": gh(available[pool_id]),
                "hours_over": int(hours or 0),
                "peak_ratio": round(float(peak), 2) if peak is not None else None,
            }
        )
    rows.sort(key=lambda row: str(row["pool_name"]))
    return rows


def _capacity_by_pool_flavor(
    names: Names,
    hourly: dict[tuple[int, int], list[float]],
    keys: set[tuple[Any, Any]],
    per_key: dict[tuple[Any, Any], list[float]],
) -> tuple[list[dict[str, Any]], list[float]]:
    """The capacity per pool and flavor, and its totals (available, used, idle, idle while
    a project waited on quota)."""
    pools, flavors = names.pools, names.flavors
    by_pool_flavor = []
    totals = [0.0, 0.0, 0.0, 0.0]
    for pool_id, flavor_id in keys:
        available = sum(hourly.get((pool_id, flavor_id), ()))
        used, capped, idle_waiting = per_key[(pool_id, flavor_id)]
        idle = max(0.0, available - capped)
        for i, value in enumerate((available, used, idle, idle_waiting)):
            totals[i] += value
        pool, flavor = pools[pool_id], flavors[flavor_id]  # type: ignore[index]
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
    return by_pool_flavor, totals


def _capacity_days(
    scope: Scope,
    hourly: dict[tuple[int, int], list[float]],
    per_day: dict[str, list[float]],
) -> list[dict[str, Any]]:
    """The capacity per day of the scope."""
    available_per_day: dict[str, float] = defaultdict(float)
    for i, hour in enumerate(scope.hours):
        available_per_day[hour.strftime("%Y-%m-%d")] += sum(
            seconds[i] for seconds in hourly.values()
        )
    days = []
    for day in sorted(available_per_day):
        available = available_per_day[day]
        used, capped, idle_waiting = per_day.get(day, [0.0, 0.0, 0.0])
        days.append(
            {
                "day": day,
                "available_gpu_hours": gh(available),
                "allocated_gpu_hours": gh(used),
                "idle_gpu_hours": gh(max(0.0, available - capped)),
                "idle_while_quota_waiting_gpu_hours": gh(idle_waiting),
            }
        )
    return days
