"""Approval policies read: the policy of a request's kind and tier, the limits they set, and the
exceptions a project had this month."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.http import Http404

from approvals.models import (
    TIER_KINDS,
    ApprovalPolicy,
)
from governance.models import (
    Grant,
    PriorityTier,
    Project,
)
from governance.selectors import (
    default_tier,
    user_can_read_rules,
)


def policy_list() -> QuerySet[ApprovalPolicy]:
    return ApprovalPolicy.objects.select_related("tier", "tier__owner").order_by(
        "kind", "-tier__score", "pk"
    )


def policy_get(*, user: Any, pk: int | str) -> ApprovalPolicy:
    if not user_can_read_rules(user):
        raise Http404
    try:
        return ApprovalPolicy.objects.select_related("tier").get(pk=pk)
    except (ApprovalPolicy.DoesNotExist, ValueError, TypeError):
        raise Http404 from None


def policy_tier(*, kind: str, project: Project, tier: PriorityTier | None) -> PriorityTier | None:
    """The tier a policy is chosen by: the target tier, or the project's own tier."""
    if kind in TIER_KINDS:
        return tier
    return project.tier or default_tier()


def policy_for(*, kind: str, tier: PriorityTier | None) -> ApprovalPolicy | None:
    """The policy of ``kind`` for ``tier``, or the kind's policy for every other tier."""
    policies = ApprovalPolicy.objects.select_related("tier", "tier__owner").filter(kind=kind)
    policies = (
        policies.filter(Q(tier=tier) | Q(tier__isnull=True))
        if tier
        else policies.filter(tier__isnull=True)
    )
    found = {policy.tier_id: policy for policy in policies}
    return found.get(tier.pk if tier else None) or found.get(None)


@dataclass(frozen=True)
class PolicyLimit:
    """What the request form shows before anyone submits: one row per kind and tier."""

    kind: str
    kind_label: str
    tier: PriorityTier | None
    policy: ApprovalPolicy


def policy_limits() -> list[PolicyLimit]:
    return [
        PolicyLimit(
            kind=policy.kind,
            kind_label=policy.get_kind_display(),
            tier=policy.tier,
            policy=policy,
        )
        for policy in policy_list()
    ]


# --- evidence -------------------------------------------------------------------------------


def _month_start(at: datetime) -> datetime:
    return at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def exceptions_this_month(*, project: Project, at: datetime) -> int:
    """Approved exceptions (grants) of ``project`` that start in the calendar month of ``at``."""
    start = _month_start(at)
    end = (start + timedelta(days=32)).replace(day=1)
    return Grant.objects.filter(project=project, starts_at__gte=start, starts_at__lt=end).count()
