"""Exceptions: the requests submitted in the window per project and kind, and the projects
whose approved exceptions in one calendar month exceed the strictest policy's count."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from approvals.models import ApprovalPolicy, RequestStage
from governance.models import GrantKind

from .._sql import day_of, fetch, seconds_between, ts
from ._common import Names, Scope


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
    projects = names.projects
    labels = dict(GrantKind.choices)
    by_kind: list[dict[str, Any]] = []
    ids: list[int] = []
    for project_id, kind, requested, approved_n, rejected, gpu_seconds_h in rows:
        project = projects[project_id]
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
    by_kind, ids = [by_kind[i] for i in order], [ids[i] for i in order]
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
    over_ids: list[int] = []
    if limit is not None:
        for project_id, count in worst.items():
            if count > limit:
                project = projects[project_id]
                over.append(
                    {"project": project.slug, "name": project.name, "count": count, "limit": limit}
                )
                over_ids.append(project_id)
    order = sorted(range(len(over)), key=lambda i: (-int(over[i]["count"]), str(over[i]["name"])))
    over, over_ids = [over[i] for i in order], [over_ids[i] for i in order]
    per_project: dict[int, dict[str, Any]] = defaultdict(
        lambda: {"by_project_kind": [], "policy_monthly_limit": limit, "over_policy": []}
    )
    for project_id, item in zip(ids, by_kind, strict=True):
        per_project[project_id]["by_project_kind"].append(item)
    for project_id, item in zip(over_ids, over, strict=True):
        per_project[project_id]["over_policy"].append(item)
    return {
        "by_project_kind": by_kind,
        "policy_monthly_limit": limit,
        "over_policy": over,
    }, dict(per_project)
