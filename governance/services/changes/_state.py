"""Locking, saving and status checks shared by the rule change services."""

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from governance.models import ChangeStatus, RuleChange


def lock_change(change: RuleChange) -> RuleChange:
    return RuleChange.objects.select_for_update().get(pk=change.pk)


def require_status(change: RuleChange, *allowed: str) -> None:
    if change.status in allowed:
        return
    if change.status in (ChangeStatus.APPLIED, ChangeStatus.ROLLED_BACK):
        raise ValidationError(
            _("Change #%(id)d was already applied.") % {"id": change.pk}, code="applied"
        )
    raise ValidationError(
        _("Change #%(id)d is %(status)s.")
        % {"id": change.pk, "status": change.get_status_display().lower()},
        code="status",
    )
