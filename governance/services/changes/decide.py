"""Deciding on a proposed rule change: approve, reject or withdraw it."""

import datetime as dt

from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import ChangeStatus, PriorityTier, RuleChange, User

from ._state import lock_change, require_status, save_change
from .spec import MEMBERSHIP


def _targets(change: RuleChange) -> list[models.Model | None]:
    result = []
    for edit in change.edits.select_related("content_type"):
        model = edit.content_type.model_class()
        assert model is not None
        result.append(model._default_manager.filter(pk=edit.object_id).first())
    return result


def _edits_own_access(change: RuleChange, user: User) -> bool:
    user_type = ContentType.objects.get_for_model(User).pk
    return any(
        (edit.content_type_id == user_type and edit.object_id == user.pk)
        or (edit.field == MEMBERSHIP and edit.key == user.pk)
        for edit in change.edits.all()
    )


def approval_problem(*, change: RuleChange, user: User) -> str | None:
    """Why ``user`` may not approve (or reject) ``change``, or ``None`` when they may."""
    if not user.is_active:
        return _("Your account is inactive.")
    if user.pk in (change.author_id, change.proposed_by_id):
        return _("You proposed this change: someone else must approve it.")
    if _edits_own_access(change, user):
        return _("This change edits your own account or membership: someone else must decide.")
    proposers = {change.author_id, change.proposed_by_id}
    needs_ops = False
    for obj in _targets(change):
        if isinstance(obj, PriorityTier):
            if obj.owner_id == user.pk or (user.is_ops and obj.owner_id in proposers):
                continue
            return _(
                "A change to the tier “%(tier)s” needs its business owner, %(owner)s (or ops "
                "when the owner proposed it)."
            ) % {"tier": obj.name, "owner": obj.owner}
        needs_ops = True
    if needs_ops and not user.is_ops:
        return _("A change to quotas, pools, projects, flavors or preemption classes needs ops.")
    return None


@transaction.atomic
def rule_change_approve(
    *, change: RuleChange, user: User, note: str = "", now: dt.datetime | None = None
) -> RuleChange:
    change = lock_change(change)
    require_status(change, ChangeStatus.PROPOSED)
    problem = approval_problem(change=change, user=user)
    if problem:
        raise PermissionDenied(problem)
    change.status = ChangeStatus.APPROVED
    change.approved_by = user
    change.approved_at = now or timezone.now()
    save_change(change, user=user, reason=(note or "").strip() or _("Approved"))
    return change


@transaction.atomic
def rule_change_reject(
    *, change: RuleChange, user: User, note: str, now: dt.datetime | None = None
) -> RuleChange:
    note = (note or "").strip()
    if not note:
        raise ValidationError({"note": _("Say why the change is rejected.")})
    change = lock_change(change)
    require_status(change, ChangeStatus.PROPOSED, ChangeStatus.APPROVED)
    problem = approval_problem(change=change, user=user)
    if problem:
        raise PermissionDenied(problem)
    change.status = ChangeStatus.REJECTED
    change.closed_by = user
    change.closed_at = now or timezone.now()
    change.close_note = note
    save_change(change, user=user, reason=note)
    return change


@transaction.atomic
def rule_change_withdraw(
    *, change: RuleChange, user: User, note: str = "", now: dt.datetime | None = None
) -> RuleChange:
    change = lock_change(change)
    require_status(change, ChangeStatus.DRAFT, ChangeStatus.PROPOSED, ChangeStatus.APPROVED)
    if user.pk not in (change.author_id, change.proposed_by_id) and not user.is_ops:
        raise PermissionDenied(_("Only the author or ops may withdraw this change."))
    change.status = ChangeStatus.WITHDRAWN
    change.closed_by = user
    change.closed_at = now or timezone.now()
    change.close_note = (note or "").strip()
    save_change(change, user=user, reason=change.close_note or _("Withdrawn"))
    return change
