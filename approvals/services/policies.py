"""Approval policies: governed rules, edited only by ops, each change with a reason.

(They are not yet part of governance's rule change sets; an edit here is recorded in the
policy's own history.)
"""

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from approvals.models import ApprovalPolicy, ApproverRule, RequestKind
from governance.models import PriorityTier, User
from governance.services import apply_fields, governed_save, require_reason

POLICY_FIELDS = (
    "max_duration_days",
    "approver",
    "approvals_required",
    "monthly_flag_threshold",
)


def _require_ops(user: User) -> None:
    if not user.is_ops:
        raise PermissionDenied(_("Only ops may change the approval policies."))


def _check(policy: ApprovalPolicy) -> None:
    duplicate = ApprovalPolicy.objects.filter(kind=policy.kind, tier=policy.tier).exclude(
        pk=policy.pk
    )
    if duplicate.exists():
        raise ValidationError(
            {
                "tier": _("There is already a policy for %(kind)s and this tier.")
                % {"kind": policy.get_kind_display().lower()}
            }
        )


@transaction.atomic
def policy_create(
    *,
    user: User,
    reason: str,
    kind: RequestKind | str,
    max_duration_days: int,
    monthly_flag_threshold: int,
    approver: ApproverRule | str = ApproverRule.OPS,
    approvals_required: int = 1,
    tier: PriorityTier | None = None,
) -> ApprovalPolicy:
    _require_ops(user)
    reason = require_reason(reason)
    policy = ApprovalPolicy(
        kind=kind,
        tier=tier,
        max_duration_days=max_duration_days,
        approver=approver,
        approvals_required=approvals_required,
        monthly_flag_threshold=monthly_flag_threshold,
    )
    _check(policy)
    governed_save(policy, user=user, reason=reason)
    return policy


@transaction.atomic
def policy_update(
    *, policy: ApprovalPolicy, user: User, reason: str, data: dict[str, Any]
) -> ApprovalPolicy:
    """Change the limits of ``policy``; its kind and tier stay (create another policy)."""
    _require_ops(user)
    reason = require_reason(reason)
    policy = ApprovalPolicy.objects.select_for_update().get(pk=policy.pk)
    apply_fields(policy, data, POLICY_FIELDS)
    governed_save(policy, user=user, reason=reason)
    return policy
