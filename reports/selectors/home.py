"""Reads for the home page: what each role needs to see first, and the figures for it."""

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext as _

from governance import selectors as governance
from governance.models import Membership, PriorityTier, ProjectRole, Quota, User
from queues.selectors import jobs_by_project


@dataclass(frozen=True)
class ProjectSummary:
    """What a project is allowed now, as the effective rules say (grants included): its tier,
    every tier below, its quotas."""

    membership: Membership
    tier: PriorityTier | None
    tier_is_default: bool
    tier_raised_by_grant: bool
    allowed_tiers: list[PriorityTier]
    quotas: list[Quota]
    # Running and waiting jobs (``queues.selectors.jobs_by_project``).
    jobs: dict[str, Any] = field(default_factory=dict)

    @property
    def project(self) -> Any:
        return self.membership.project

    @property
    def is_lead(self) -> bool:
        return self.membership.role == ProjectRole.LEAD


def project_summaries(
    *, user: User, memberships: list[Membership] | None = None
) -> list[ProjectSummary]:
    """One summary per project ``user`` belongs to (a fixed number of queries; one fewer
    given ``user``'s ``memberships`` as ``governance.user_memberships`` reads them)."""
    if memberships is None:
        memberships = list(governance.user_memberships(user=user))
    if not memberships:
        return []
    rules = governance.effective_rules(
        at=timezone.now(),
        project_slugs=[membership.project.slug for membership in memberships],
    )
    quotas: dict[int, list[Quota]] = defaultdict(list)
    for quota in governance.quotas_for_projects(
        project_ids=[membership.project_id for membership in memberships]
    ):
        quotas[quota.project_id].append(quota)
    jobs = jobs_by_project(project_ids=[membership.project_id for membership in memberships])
    summaries = []
    for membership in memberships:
        effective = rules.projects[membership.project.slug]
        base = membership.project.tier or rules.default_tier
        summaries.append(
            ProjectSummary(
                membership=membership,
                tier=effective.tier,
                tier_is_default=membership.project.tier is None and effective.tier == base,
                tier_raised_by_grant=effective.tier != base,
                allowed_tiers=list(effective.allowed_tiers),
                quotas=quotas[membership.project_id],
                jobs=jobs.get(membership.project_id, {}),
            )
        )
    return summaries


def pool_usage_figure(*, usage: list[governance.PoolFlavorUse]) -> dict[str, Any]:
    """A grouped bar chart of capacity against what is committed, per pool and flavor.

    Plain JSON data for ``json_script`` that plotly.js draws in the browser (``charts.js``):
    written out as plotly.js reads it rather than built through ``plotly.graph_objects``,
    whose validation of every attribute and the default theme it embeds cost the home page
    time and half of its bytes (the colours, fonts and grid are set here).
    """
    labels = [f"{use.pool.name} · {use.flavor.name}" for use in usage]

    def bars(name: str, values: list[int], color: str) -> dict[str, Any]:
        return {"type": "bar", "name": name, "x": labels, "y": values, "marker": {"color": color}}

    axis = {"gridcolor": "#e2e8f0", "linecolor": "#94a3b8", "zerolinecolor": "#94a3b8"}
    return {
        "data": [
            bars(_("Capacity"), [use.capacity for use in usage], "#94a3b8"),
            bars(_("Guaranteed to projects"), [use.guaranteed for use in usage], "#2563eb"),
            bars(_("Held by child pools"), [use.child_capacity for use in usage], "#0d9488"),
        ],
        "layout": {
            "barmode": "group",
            "height": 360,
            "margin": {"l": 48, "r": 16, "t": 16, "b": 64},
            "legend": {"orientation": "h", "y": -0.2},
            "xaxis": {**axis, "automargin": True},
            "yaxis": {**axis, "title": {"text": _("GPUs")}, "rangemode": "tozero"},
            "plot_bgcolor": "#ffffff",
            "paper_bgcolor": "#ffffff",
            "font": {
                "family": "system-ui, -apple-system, 'Segoe UI', sans-serif",
                "size": 13,
                "color": "#1e293b",
            },
        },
    }
