"""Approval policies: a governed rule kind, like tiers and quotas.

Who decides which kind of request, how many distinct approvals it needs, the longest time
box and the monthly flag threshold are rules about rules: a change of a policy is proposed,
approved by a second person (never its author), applied through the services below with a
history row naming the change, and rolled back by a new change (``policy_rule_kind``,
registered in ``ApprovalsConfig.ready()``).

``policy_create`` and ``policy_update`` are what applying a change calls; the demo's own
seeding calls ``policy_create`` directly to bootstrap an organisation before anyone can
approve anything. Whatever a change writes (a creation, an edit, a rollback, a deletion)
must keep four eyes on requests: no policy it leaves in force lets one person decide a kind
of request alone (``FOUR_EYES_ON_REQUESTS``), so such a change is refused when proposed.
"""

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from approvals.models import ApprovalPolicy, ApproverRule, RequestKind
from governance.models import EditKind, PriorityTier, User
from governance.services import RuleKind, apply_fields, governed_save, require_reason
from governance.services.changes import rule_object_delete

POLICY_FIELDS = (
    "max_duration_days",
    "approver",
    "approvals_required",
    "monthly_flag_threshold",
)
POLICY_SNAPSHOT = ("kind", "tier", *POLICY_FIELDS)

# The rule a policy change keeps, named in its refusal.
FOUR_EYES_ON_REQUESTS = gettext_noop(
    "Four eyes on requests: every kind of request needs at least two distinct approvers, so "
    "that no one person decides it alone; “%(policy)s” would need %(count)d."
)
MIN_APPROVERS = 2


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


def policy_four_eyes_check(policy: ApprovalPolicy) -> None:
    """Refuse ``policy`` if it would let one person decide its kind of request alone."""
    if policy.approvals_required is not None and policy.approvals_required < MIN_APPROVERS:
        raise ValidationError(
            {
                "approvals_required": _(FOUR_EYES_ON_REQUESTS)
                % {"policy": policy, "count": policy.approvals_required}
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


# --- the rule kind: what applying a change (and its dry run at proposal) calls -----------------


def _create_from_change(*, user: User, reason: str, data: dict[str, Any]) -> ApprovalPolicy:
    policy = policy_create(user=user, reason=reason, **data)
    policy_four_eyes_check(policy)
    return policy


def _update_from_change(
    *, obj: models.Model, user: User, reason: str, data: dict[str, Any]
) -> ApprovalPolicy:
    assert isinstance(obj, ApprovalPolicy)
    policy = policy_update(policy=obj, user=user, reason=reason, data=data)
    policy_four_eyes_check(policy)
    return policy


def _delete_from_change(*, obj: models.Model, user: User, reason: str) -> None:
    """Delete a policy that no request names; its kind then falls back to the policy for
    every other tier, which must keep four eyes too."""
    assert isinstance(obj, ApprovalPolicy)
    if obj.tier_id is not None:
        fallback = ApprovalPolicy.objects.filter(kind=obj.kind, tier__isnull=True).first()
        if fallback is not None:
            policy_four_eyes_check(fallback)
    rule_object_delete(obj=obj, user=user, reason=reason)


def policy_rule_kind() -> RuleKind:
    """Approval policies as a rule kind of the change machinery (registered in
    ``ApprovalsConfig.ready()``); a change of one is approved by ops, never its author."""
    return RuleKind(
        model=ApprovalPolicy,
        object_type="approval_policy",
        fields=dict.fromkeys(POLICY_FIELDS, EditKind.ACCESS),
        update=_update_from_change,
        create=_create_from_change,
        delete=_delete_from_change,
        snapshot_fields=POLICY_SNAPSHOT,
        required_fields=("kind", "max_duration_days", "monthly_flag_threshold"),
        key_field="pk",
        exists_kind=EditKind.ACCESS,
        check=policy_four_eyes_check,
        name_related=("tier",),
    )
