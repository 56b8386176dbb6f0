"""Exceptions: the requests submitted in the window per project and kind, the projects whose
approved exceptions in one calendar month exceed the strictest policy's count, and each
approved exception's outcome: the median wait of its project's jobs submitted inside its time
box (and the window), and their tier, to set against the tier's median wait of the window."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from approvals.models import ApprovalPolicy, RequestStage
from governance.models import GrantKind

from .._sql import day_of, fetch, key_id, least, percentile_sets, seconds_between, ts
from ._common import Names, Scope, iso


def exceptions(
    scope: Scope, t: dict[str, str], names: Names
) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """The exceptions of the scope, and of each project that asked for one (its rows; the
    policy's limit is the site's)."""
    filters = ""
    if scope.project_id is not None:
        filters += " AND r.project_id = %(project)s"
    if scope.pool_id is not None:
        filters += (
            f" AND (r.pool_id = %(pool)s OR (r.pool_id IS NULL AND r.project_id IN "
            f"(SELECT project_id FROM {t['quota']} WHERE pool_id = %(pool)s)))"
        )
    approved = f"r.stage = '{RequestStage.APPROVED.value}'"
    rows, monthly = _counts(scope, t, filters, approved)
    outcomes, project_outcomes = _outcomes(scope, t, names, filters, approved)
    by_kind, ids = _by_project_kind(rows, names)
    limits = [
        value
        for value in ApprovalPolicy.objects.values_list("monthly_flag_threshold", flat=True)
        if value is not None
    ]
    limit = min(limits) if limits else None
    over, over_ids = _over_policy(monthly, limit, names)
    per_project: dict[int, dict[str, Any]] = defaultdict(
        lambda: {
            "by_project_kind": [],
            "policy_monthly_limit": limit,
            "over_policy": [],
            "outcomes": [],
        }
    )
    for project_id, item in zip(ids, by_kind, strict=True):
        per_project[project_id]["by_project_kind"].append(item)
    for project_id, item in zip(over_ids, over, strict=True):
        per_project[project_id]["over_policy"].append(item)
    for project_id, items in project_outcomes.items():
        per_project[project_id]["outcomes"] = items
    return {
        "by_project_kind": by_kind,
        "policy_monthly_limit": limit,
        "over_policy": over,
        "outcomes": outcomes,
    }, dict(per_project)


def _counts(
    scope: Scope, t: dict[str, str], filters: str, approved: str
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Two queries of the requests: those submitted in the window per project and kind
    (requested, approved, rejected, GPU-hours approved), and those approved in it per
    project and calendar month."""
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
    return rows, monthly


def _by_project_kind(
    rows: list[tuple[Any, ...]], names: Names
) -> tuple[list[dict[str, Any]], list[int]]:
    """The rows per project and kind by name and kind, and their projects' ids."""
    labels = dict(GrantKind.choices)
    by_kind: list[dict[str, Any]] = []
    ids: list[int] = []
    for project_id, kind, requested, approved_n, rejected, gpu_seconds_h in rows:
        project = names.projects[project_id]
        ids.append(project_id)
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
    order = sorted(range(len(by_kind)), key=lambda i: (by_kind[i]["name"], by_kind[i]["kind"]))
    return [by_kind[i] for i in order], [ids[i] for i in order]


def _over_policy(
    monthly: list[tuple[Any, ...]], limit: int | None, names: Names
) -> tuple[list[dict[str, Any]], list[int]]:
    """The projects whose approved exceptions in one calendar month exceed ``limit``, the
    most first, and their ids."""
    worst: dict[int, int] = defaultdict(int)
    for project_id, _month, count in monthly:
        worst[project_id] = max(worst[project_id], int(count))
    over: list[dict[str, Any]] = []
    over_ids: list[int] = []
    if limit is not None:
        for project_id, count in worst.items():
            if count > limit:
                project = names.projects[project_id]
                over.append(
                    {"project": project.slug, "name": project.name, "count": count, "limit": limit}
                )
                over_ids.append(project_id)
    order = sorted(range(len(over)), key=lambda i: (-int(over[i]["count"]), str(over[i]["name"])))
    return [over[i] for i in order], [over_ids[i] for i in order]


def _outcomes(
    scope: Scope, t: dict[str, str], names: Names, filters: str, approved: str
) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]]]:
    """Each exception approved among the window's requests, with the jobs of its project
    submitted inside its time box and the window: how many, their median wait (censored at
    the window's end, as every wait of the review) and their tier (the most frequent one).
    One query of the few approved requests, the waits read by submit time."""
    end = ts("end")
    wait = seconds_between(least("w.wait_end", end), "w.submitted_at")
    source = (
        f"(SELECT r.id AS request_id, w.tier_id AS tier_id, "
        f"CASE WHEN w.wait_end IS NULL THEN {seconds_between(end, 'w.submitted_at')} "
        f"ELSE {wait} END AS wait "
        f"FROM {t['request']} r JOIN {t['wait']} w ON w.project_id = r.project_id "
        f"AND w.submitted_at >= r.starts_at AND w.submitted_at < r.ends_at "
        f"AND w.submitted_at >= {ts('start')} AND w.submitted_at < {end} "
        f"WHERE {approved} AND r.submitted_at >= {ts('start')} AND r.submitted_at < {end}"
        f"{filters}) AS ew"
    )
    medians = {
        key_id(row[1]): (int(row[4]), row[5])
        for row in fetch(
            percentile_sets(source=source, value="wait", sets=(("r", ("request_id",)),)),
            scope.params,
        )
    }
    tiers: dict[int | None, int | None] = {}
    for request_id, tier_id, _count in fetch(
        f"SELECT request_id, tier_id, COUNT(*) FROM {source} GROUP BY request_id, tier_id "
        "ORDER BY request_id, COUNT(*) DESC, tier_id",
        scope.params,
    ):
        tiers.setdefault(key_id(request_id), key_id(tier_id))
    requests = fetch(
        f"SELECT r.id, r.project_id, r.kind, r.starts_at, r.ends_at FROM {t['request']} r "
        f"WHERE {approved} AND r.submitted_at >= {ts('start')} AND r.submitted_at < {end}"
        f"{filters} ORDER BY r.starts_at, r.id",
        scope.params,
    )
    labels = dict(GrantKind.choices)
    outcomes: list[dict[str, Any]] = []
    per_project: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for request_id, project_id, kind, starts_at, ends_at in requests:
        project = names.projects[project_id]
        jobs, median = medians.get(request_id, (0, None))
        tier = names.tiers.get(tiers.get(request_id))
        item = {
            "request": request_id,
            "project": project.slug,
            "name": project.name,
            "kind": kind,
            "kind_label": str(labels.get(kind, kind)),
            "starts_at": _iso(starts_at),
            "ends_at": _iso(ends_at),
            "jobs": jobs,
            "p50": round(float(median), 3) if median is not None else None,
            "tier": tier.slug if tier else None,
        }
        outcomes.append(item)
        per_project[project_id].append(item)
    return outcomes, dict(per_project)


def _iso(value: Any) -> str:
    """A timestamp from a raw query (a datetime on PostgreSQL, text on SQLite) as UTC ISO."""
    moment = value if isinstance(value, datetime) else parse_datetime(str(value))
    if moment is None:
        return str(value)
    return iso(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
