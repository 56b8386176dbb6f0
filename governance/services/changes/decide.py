"""Deciding on a proposed rule change: approve, reject or withdraw it."""

import datetime as dt

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from governance.models import ChangeAction, ChangeStatus, RuleChange, User

from .._history import REASON_MAX_LENGTH, governed_save, require_text
from ._state import lock_change, require_action


@transaction.atomic
def rule_change_approve(
    *, change: RuleChange, user: User, note: str = "", now: dt.datetime | None = None
) -> RuleChange:
    change = lock_change(change)
    require_action(change, user=user, action=ChangeAction.APPROVE)
    change.status = ChangeStatus.APPROVED
    change.approved_by = user
    change.approved_at = now or timezone.now()
    governed_save(change, user=user, reason=(note or "").strip() or gettext_noop("Approved"))
    return change


@transaction.atomic
def rule_change_reject(
    *, change: RuleChange, user: User, note: str, now: dt.datetime | None = None
) -> RuleChange:
    note = require_text(
        note,
        field="note",
        message=_("Say why the change is rejected."),
        limit=REASON_MAX_LENGTH,
    )
    change = lock_change(change)
    require_action(change, user=user, action=ChangeAction.REJECT)
    change.status = ChangeStatus.REJECTED
    change.closed_by = user
    change.closed_at = now or timezone.now()
    change.close_note = note
    governed_save(change, user=user, reason=note)
    return change


@transaction.atomic
def rule_change_withdraw(
    *, change: RuleChange, user: User, note: str = "", now: dt.datetime | None = None
) -> RuleChange:
    change = lock_change(change)
    require_action(change, user=user, action=ChangeAction.WITHDRAW)
    change.status = ChangeStatus.WITHDRAWN
    change.closed_by = user
    change.closed_at = now or timezone.now()
    change.close_note = (note or "").strip()
    governed_save(change, user=user, reason=change.close_note or gettext_noop("Withdrawn"))
    return change
