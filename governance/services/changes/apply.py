"""Applying an approved rule change: every edit through its rule kind's service, or none."""

import datetime as dt

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from governance.models import (
    ChangeAction,
    ChangeStatus,
    RevisionTrigger,
    RuleChange,
    RuleEdit,
    User,
    applying_change,
)
from governance.selectors.changes import EXISTS, RuleKind, rule_kind_for, snapshot, stale_edits

from .._history import governed_save
from ..revisions import rules_revision_create
from ._state import lock_change, require_action
from .spec import value_from_json


def apply_edits(change: RuleChange, *, user: User) -> None:
    """Write every edit through its rule kind's services; history rows name the change."""
    groups: dict[tuple[type[models.Model], int], list[RuleEdit]] = {}
    for edit in change.edits.select_related("content_type").order_by("pk"):
        model = edit.content_type.model_class()
        assert model is not None
        groups.setdefault((model, edit.object_id), []).append(edit)
    token = applying_change.set(change.pk)
    try:
        for (model, object_id), edits in groups.items():
            kind = rule_kind_for(model)
            if kind is None:
                raise ValidationError(_("This field cannot be changed here."))
            _apply_object(kind, object_id, edits, user=user, reason=change.reason)
    finally:
        applying_change.reset(token)


def _apply_object(
    kind: RuleKind, object_id: int, edits: list[RuleEdit], *, user: User, reason: str
) -> None:
    """Create one object, or update its fields and keyed fields and then maybe delete it."""
    model = kind.model
    exists = next((edit for edit in edits if edit.field == EXISTS), None)
    obj = model._default_manager.filter(pk=object_id).first() if object_id else None
    if exists is not None and exists.new_value is not None:
        if obj is not None or kind.create is None:
            raise ValidationError(
                _("%(kind)s #%(id)d already exists.")
                % {"kind": model._meta.verbose_name, "id": object_id}
            )
        data = {
            name: value_from_json(model, name, value)
            for name, value in exists.new_value.items()
            if name in kind.snapshot_fields
        }
        obj = kind.create(user=user, reason=reason, data=data)
        # The edit names the object it made and records it as made (with the service's
        # defaults), so that a rollback finds it unchanged (undone with the rest when the
        # dry run ends).
        exists.object_id = obj.pk
        exists.new_value = snapshot(obj)
        exists.save(update_fields=["object_id", "new_value"])
        return
    if obj is None:
        raise ValidationError(
            _("%(kind)s #%(id)d no longer exists.")
            % {"kind": model._meta.verbose_name, "id": object_id}
        )
    data = {
        edit.field: value_from_json(model, edit.field, edit.new_value)
        for edit in edits
        if edit.field != EXISTS and edit.field not in kind.keyed
    }
    if data:
        kind.update(obj=obj, user=user, reason=reason, data=data)
    for edit in edits:
        keyed = kind.keyed.get(edit.field)
        if keyed is not None:
            keyed.apply(obj=obj, key=edit.key, value=edit.new_value, user=user, reason=reason)
    if exists is not None:
        if kind.delete is None:
            raise ValidationError(_("This field cannot be changed here."))
        kind.delete(obj=obj, user=user, reason=reason)


@transaction.atomic
def rule_change_apply(
    *, change: RuleChange, user: User, now: dt.datetime | None = None
) -> RuleChange:
    """Approved → applied: every edit in one transaction, or none.

    The change row is locked first, so of two operators applying at once one applies and
    the other is told that the change was already applied. An edit whose field was changed
    by someone else since the proposal is not overwritten: the change is refused.
    """
    change = lock_change(change)
    require_action(change, user=user, action=ChangeAction.APPLY)
    stale = stale_edits(change=change)
    if stale:
        raise ValidationError(
            _(
                "The rules changed since this change was proposed (%(fields)s): it would "
                "overwrite a later edit. Withdraw it and propose it again."
            )
            % {
                "fields": ", ".join(
                    f"{edit.content_type.name} #{edit.object_id} {edit.field}"
                    for edit, _now in stale
                )
            },
            code="stale",
        )
    apply_edits(change, user=user)
    change.status = ChangeStatus.APPLIED
    change.applied_by = user
    change.applied_at = now or timezone.now()
    # Stored reasons and notes are English, shown in the reader's language (models.texts).
    governed_save(change, user=user, reason=gettext_noop("Applied"))
    if change.rollback_of is not None:
        original = lock_change(change.rollback_of)
        original.status = ChangeStatus.ROLLED_BACK
        governed_save(
            original,
            user=user,
            reason=gettext_noop("Rolled back by change #%(id)d") % {"id": change.pk},
        )
    rules_revision_create(
        trigger=RevisionTrigger.RULE_CHANGE,
        note=gettext_noop("Change #%(id)d: %(title)s") % {"id": change.pk, "title": change.title},
        user=user,
    )
    return change
