"""The evidence a decider reads beside a request: the project's workload (through the settings
hook) and its recent use."""

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from approvals.models import (
    grant_summary,
)
from governance.models import (
    Grant,
    Project,
)
from governance.selectors import (
    effective_rules,
    pool_usage,
)

from .policies import exceptions_this_month
from .requests import EVIDENCE_USAGE_DAYS, EVIDENCE_WINDOW_DAYS


def _ref(obj: Any) -> dict[str, Any] | None:
    if obj is None:
        return None
    return {"slug": obj.slug, "name": obj.name}


def _hook(name: str) -> Any:
    """A callable named by a setting (the workload side lives in an app approvals may not
    import); None when the setting is empty."""
    path = getattr(settings, name, "")
    return import_string(path) if path else None


def workload_evidence(
    *, project: Project, at: datetime, job_ids: list[str] | None = None
) -> dict[str, Any]:
    """Usage against guarantee and maximum, waits by category and the named jobs' state, as
    plain data from ``ARBITER_WORKLOAD_EVIDENCE`` and ``ARBITER_JOBS_STATUS``."""
    summary = _hook("ARBITER_WORKLOAD_EVIDENCE")
    status = _hook("ARBITER_JOBS_STATUS")
    data: dict[str, Any] = {"usage": None, "recent_waits": None, "jobs": None}
    if summary is not None:
        found = summary(project=project, days=EVIDENCE_USAGE_DAYS, at=at)
        data["usage"] = {key: value for key, value in found.items() if key != "waits"}
        data["recent_waits"] = found.get("waits", [])
    if status is not None and job_ids:
        data["jobs"] = status(project=project, job_ids=list(job_ids))
    return data


def project_evidence(
    *, project: Project, at: datetime, job_ids: list[str] | None = None
) -> dict[str, Any]:
    """What an approver decides on, as JSON: stored on the request when it is submitted.

    The project's tier and quotas as the effective rules have them at ``at`` (base rules
    plus active grants), the pool's capacity and commitment next to each quota, and the
    project's approved exceptions of the last 90 days. Usage, recent waits and the named
    jobs' state come from the workload evidence (``workload_evidence``); ``None`` when no
    collector is configured, never made up.
    """
    rules = effective_rules(at=at, project_slugs=[project.slug])
    effective = rules.projects.get(project.slug)
    pools = {(use.pool.pk, use.flavor.pk): use for use in pool_usage()}
    quotas = []
    tier = None
    if effective is not None:
        tier = effective.tier
        for quota in effective.quotas:
            use = pools.get((quota.quota.pool_id, quota.quota.flavor_id))
            quotas.append(
                {
                    "pool": _ref(quota.quota.pool),
                    "flavor": _ref(quota.quota.flavor),
                    "guarantee": quota.guarantee,
                    "borrow_limit": quota.borrow_limit,
                    "maximum": quota.maximum,
                    "lending_limit": quota.lending_limit,
                    "preemption_class": {
                        **(_ref(quota.preemption_class) or {}),
                        "kind": quota.preemption_class.kind,
                    },
                    "changed_by_grants": quota.changed_by_grants,
                    "pool_capacity": use.capacity if use else None,
                    "pool_committed": use.committed if use else None,
                }
            )
    since = at - timedelta(days=EVIDENCE_WINDOW_DAYS)
    recent = (
        Grant.objects.filter(project=project, starts_at__lte=at, ends_at__gte=since)
        .select_related("tier", "pool", "flavor", "preemption_class")
        .order_by("-starts_at", "-pk")
    )
    exceptions = [
        {
            "id": grant.pk,
            "kind": grant.kind,
            "kind_label": str(grant.get_kind_display()),
            "summary": grant_summary(grant),
            "starts_at": grant.starts_at.isoformat(),
            "ends_at": grant.ends_at.isoformat(),
            "state": grant.state,
            "source": grant.source,
        }
        for grant in recent
    ]
    return {
        "captured_at": at.isoformat(),
        "tier": {**(_ref(tier) or {}), "score": tier.score} if tier else None,
        "base_tier": _ref(project.tier),
        "quotas": quotas,
        **workload_evidence(project=project, at=at, job_ids=job_ids),
        "exceptions_window_days": EVIDENCE_WINDOW_DAYS,
        "recent_exceptions": exceptions,
        "exceptions_this_month": exceptions_this_month(project=project, at=at),
    }


# --- grants of a project --------------------------------------------------------------------
