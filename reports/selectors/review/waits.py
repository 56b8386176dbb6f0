"""Waits: the jobs submitted in the window, their percentiles overall and per tier, project,
pool, flavor, category and day × tier (and the same per project, for the build): one query
of the window's waits (``queues.WorkloadWait``, one narrow row per job, kept by the rollup),
one sort of them for every set, or, on two connections at once, two queries each taking half
of the grouping sets (``wait_queries``), read together (``waits_from_rows``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from functools import partial
from typing import Any

from django.utils.translation import gettext as _

from queues.models import WaitCategory

from .. import _sql
from .._sql import fetch, hashed_in_order, key_id, least, percentile_sets, seconds_between, ts
from ._common import Names, Scope, r3

# (name, keys): the figures of the whole scope; each also exists per project ("p_" + name,
# the project's id first), except "project" itself, which is the project's overall row.
WAIT_SETS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("all", ()),
    ("tier", ("tier_id",)),
    ("project", ("project_id",)),
    ("pool", ("pool_id",)),
    ("flavor", ("flavor_id",)),
    ("day_tier", ("day", "tier_id")),
    ("category", ("category",)),
)
CATEGORY_SETS = ("category", "p_category")
PER_PROJECT_SETS = tuple(
    ("p_" + name, ("project_id", *keys))
    for name, keys in WAIT_SETS
    if name not in ("all", "project")
)


# The wait percentiles the review shows (the rows' columns after the count, in this order).
WAIT_PERCENTILES = (0.5, 0.9, 0.95, 0.99)
# The total wait of the jobs that started (the started-only mean).
STARTED_WAIT = "SUM(wait * started_)"


def started_only(row: tuple[Any, ...] | None) -> dict[str, Any]:
    """The started jobs' own figures from a row's subset columns (total started wait, then
    started jobs, p50, p90, p95, p99, max): the jobs that started before the window's end,
    each its submit to its first start. The figures a trace publishes are of this kind
    (never-started and still-waiting jobs left out); the review's headline figures count
    every job."""
    if row is None or len(row) < 21 or not row[15]:
        return {"jobs": 0, "p50": None, "p90": None, "p95": None, "p99": None, "mean": None,
                "max": None}  # fmt: skip
    total, n, p50, p90, p95, p99, high = row[14:21]
    return {
        "jobs": int(n),
        "p50": r3(p50),
        "p90": r3(p90),
        "p95": r3(p95),
        "p99": r3(p99),
        "mean": r3(float(total or 0) / int(n)),
        "max": r3(high),
    }


def wait_stats(row: tuple[Any, ...] | None) -> dict[str, Any]:
    """WaitStats from a ``percentile_sets`` row (gs, k1, k2, k3, n, p50, p90, p95, p99, max,
    censored, over, total wait, never started, then ``started_only``'s columns)."""
    if row is None or not row[4]:
        return {
            "jobs": 0,
            "never_started": 0,
            "waiting_at_end": 0,
            "p50": None,
            "p90": None,
            "p95": None,
            "p99": None,
            "mean": None,
            "max": None,
            "over_threshold": 0,
            "started_only": started_only(None),
        }
    n, p50, p90, p95, p99, high, censored, over, total, never = row[4:14]
    return {
        "jobs": int(n),
        "never_started": int(never or 0),
        "waiting_at_end": int(censored or 0),
        "p50": r3(p50),
        "p90": r3(p90),
        "p95": r3(p95),
        "p99": r3(p99),
        "mean": r3(float(total or 0) / int(n)),
        "max": r3(high),
        "over_threshold": int(over or 0),
        "started_only": started_only(row),
    }


def _window(scope: Scope, t: dict[str, str], names: Names) -> str:
    """The CTEs ``w`` and ``wo``: the scope's waits (one row per job submitted in the window,
    with its wait, flags and keys)."""
    end = ts("end")
    # The tiers' wait alerts, written into the query (a handful of tiers): cheaper than a join
    # per job.
    alerts = [
        f"WHEN {int(tier_id)} THEN {int(tier.wait_alert_minutes)}"
        for tier_id, tier in names.tiers.items()
        if tier_id is not None and tier.wait_alert_minutes is not None
    ]
    alert = f"CASE tier_id {' '.join(alerts)} END" if alerts else "NULL"
    filters = ""
    if scope.project_id is not None:
        filters += " AND project_id = %(project)s"
    if scope.pool_id is not None:
        filters += " AND pool_id = %(pool)s"
    # A wait that had not ended by the window's end (or has no end yet) is censored there; so
    # is one still going on when its source stopped (a trace's end: ``censored``), at that end.
    return (
        f"WITH w AS (SELECT project_id, tier_id, flavor_id, pool_id, category, day, "
        f"{seconds_between(least('wait_end', end), 'submitted_at')} AS wait, "
        f"CASE WHEN wait_end < {end} AND NOT censored THEN 0 ELSE 1 END AS censored, "
        f"CASE WHEN wait_end < {end} AND NOT started AND NOT censored THEN 1 ELSE 0 END "
        f"AS never_, "
        f"CASE WHEN wait_end < {end} AND started AND NOT censored THEN 1 ELSE 0 END "
        f"AS started_, "
        f"{alert} AS alert "
        f"FROM {t['wait']} WHERE submitted_at >= {ts('start')} AND submitted_at < {end}"
        f"{filters}), "
        f"wo AS (SELECT w.*, CASE WHEN alert IS NOT NULL AND wait > alert * 60 THEN 1 ELSE 0 "
        f"END AS over_ FROM w) "
    )


# The sums of a wait row after its percentiles (``wait_stats``' columns from the censored).
WAIT_SUMS = ("SUM(censored)", "SUM(over_)", "SUM(wait)", "SUM(never_)", STARTED_WAIT)


def _query(
    scope: Scope,
    t: dict[str, str],
    names: Names,
    sets: tuple[tuple[str, tuple[str, ...]], ...],
) -> list[tuple[Any, ...]]:
    ctes = _window(scope, t, names)
    options: dict[str, Any] = {
        "source": "wo",
        "value": "wait",
        "sets": sets,
        # The total wait gives the mean (and the categories' hours).
        "extra": WAIT_SUMS,
        "percentiles": WAIT_PERCENTILES,
        # The started jobs' own percentiles, from the same pass (``started_only``).
        "subset": "started_",
    }
    if _sql.is_postgres():
        # One sort of the window's waits, every group's values collected in that order: far
        # cheaper than a percentile sort per set and group. Only when the plan reads the sorted
        # waits in order (checked); otherwise percentile_cont per group.
        fast = ctes + percentile_sets(**options, ordered=True)
        if hashed_in_order(fast, scope.params):
            return fetch(fast, scope.params)
    return fetch(ctes + percentile_sets(**options), scope.params)


def shape_waits(rows_of: dict[str, list[tuple[Any, ...]]], names: Names) -> dict[str, Any]:
    """The waits part of the metrics from the rows of each set (keys in the set's order;
    a set without rows: none)."""
    by_set: dict[str, list[tuple[Any, ...]]] = defaultdict(list, rows_of)
    overall = by_set["all"][0] if by_set["all"] else None
    return {
        "overall": wait_stats(overall),
        "by_tier": _by_tier(by_set["tier"], names),
        "by_project": _by_project(by_set["project"], names),
        "by_pool": _named(by_set["pool"], names.pools, "pool", _("No pool")),
        "by_flavor": _named(by_set["flavor"], names.flavors, "flavor", _("No flavor")),
        "by_category": _by_category(by_set["category"]),
        "daily_by_tier": _daily_by_tier(by_set["day_tier"], names),
    }


def _by_tier(rows: list[tuple[Any, ...]], names: Names) -> list[dict[str, Any]]:
    """Per tier, in the tiers' order, with its threshold (its wait alert)."""
    by_tier = []
    for row in rows:
        tier = names.tiers.get(key_id(row[1]))
        by_tier.append(
            {
                **wait_stats(row),
                "tier": tier.slug if tier else None,
                "name": tier.name if tier else _("No tier"),
                "threshold_seconds": (
                    tier.wait_alert_minutes * 60
                    if tier is not None and tier.wait_alert_minutes is not None
                    else None
                ),
                "_rank": names.tier_rank(key_id(row[1])),
            }
        )
    by_tier.sort(key=lambda r: r["_rank"])
    for item in by_tier:
        del item["_rank"]
    return by_tier


def _by_project(rows: list[tuple[Any, ...]], names: Names) -> list[dict[str, Any]]:
    """Per project with its base tier, the longest p90 first."""
    by_project = []
    for row in rows:
        project = names.projects.get(key_id(row[1]))
        base = (project.tier or names.default_tier) if project else None
        by_project.append(
            {
                **wait_stats(row),
                "project": project.slug if project else None,
                "name": project.name if project else _("No project"),
                "tier": base.slug if base else None,
            }
        )
    by_project.sort(
        key=lambda r: (r["p90"] is None, -(r["p90"] or 0), r["name"], r["project"] or "")
    )
    return by_project


def _named(rows: list[tuple[Any, ...]], objects: dict, key: str, none: str) -> list[dict]:
    """Per pool or flavor (``key``), by name, the rows of none last."""
    out = []
    for row in rows:
        obj = objects.get(key_id(row[1]))
        out.append(
            {
                **wait_stats(row),
                key: obj.slug if obj else None,
                "name": obj.name if obj else none,
            }
        )
    out.sort(key=lambda r: (r[key] is None, r["name"]))
    return out


def _daily_by_tier(rows: list[tuple[Any, ...]], names: Names) -> list[dict[str, Any]]:
    """Per day and tier, the days in order, the tiers in theirs."""
    daily = []
    for row in rows:
        tier = names.tiers.get(key_id(row[2]))
        stats = wait_stats(row)
        daily.append(
            {
                "day": str(row[1]),
                "tier": tier.slug if tier else None,
                "p50": stats["p50"],
                "p90": stats["p90"],
                "p95": stats["p95"],
                "p99": stats["p99"],
                "jobs": stats["jobs"],
                "started_only": stats["started_only"],
                "_rank": names.tier_rank(key_id(row[2])),
            }
        )
    daily.sort(key=lambda r: (r["day"], r["_rank"]))
    for item in daily:
        del item["_rank"]
    return daily


def _by_category(rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Per wait category, every category (jobs with no category count as unclassified)."""
    per_category: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for row in rows:
        totals = per_category[row[1] or WaitCategory.UNCLASSIFIED.value]
        totals[0] += int(row[4])
        totals[1] += float(row[12] or 0)
    return [
        {
            "category": category.value,
            "label": str(category.label),
            "jobs": int(per_category[category.value][0]),
            "wait_seconds": round(per_category[category.value][1], 3),
        }
        for category in WaitCategory
    ]


def wait_queries(
    scope: Scope, t: dict[str, str], names: Names, *, per_project: bool = False, split: bool = False
) -> list[Callable[[], list[tuple[Any, ...]]]]:
    """The queries of the scope's waits (``waits_from_rows`` reads their rows together).

    ``split``: for two connections that run at once, two queries of about the same cost,
    each sorting the window's waits and grouping them by half of the sets (the cost is
    mostly per set and job; the second takes the sets by pool, the categories and the finest
    set by day). Otherwise one query, one sort for every set (one scan and one sort fewer:
    measured −18 % of the database's CPU for a 1 M-job month on one connection)."""
    # Per project, the site's categories are the sums of the projects' (no set of their own).
    sets = (
        tuple(item for item in WAIT_SETS if item[0] != "category") + PER_PROJECT_SETS
        if per_project
        else WAIT_SETS
    )
    if not split:
        return [partial(_query, scope, t, names, sets)]
    second = {"pool", "p_pool", *CATEGORY_SETS, "p_day_tier" if per_project else "day_tier"}
    return [
        partial(_query, scope, t, names, tuple(item for item in sets if item[0] not in second)),
        partial(_query, scope, t, names, tuple(item for item in sets if item[0] in second)),
    ]


def waits_from_rows(
    rows: list[tuple[Any, ...]], names: Names, per_project: bool
) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """The waits of the scope, and (``per_project``) of each project with jobs in it, as
    they are with the project as scope, from the rows of ``wait_queries``."""
    by_set: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    # Per project: the project's sets, keys shifted left (the project's id dropped).
    project_sets: dict[int, dict[str, list[tuple[Any, ...]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for row in rows:
        name = row[0]
        if name.startswith("p_"):
            project_id = key_id(row[1])
            if project_id is not None:
                project_sets[project_id][name[2:]].append((name[2:], *row[2:4], None, *row[4:]))
            if name == "p_category":
                by_set["category"].append(("category", row[2], None, None, *row[4:]))
            continue
        by_set[name].append(row)
        if per_project and name == "project" and key_id(row[1]) is not None:
            project_sets[key_id(row[1])]["project"].append(row)  # type: ignore[index]
            project_sets[key_id(row[1])]["all"].append(row)  # type: ignore[index]
    shaped = {project_id: shape_waits(sets, names) for project_id, sets in project_sets.items()}
    return shape_waits(by_set, names), shaped
