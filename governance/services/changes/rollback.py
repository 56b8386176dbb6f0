"""Rolling back an applied rule change: a new change that restores the old values."""

import datetime as dt

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from governance.models import (
    ChangeAction,
    ChangeStatus,
    ConflictChoice,
    RuleChange,
    RuleEdit,
    User,
)
from governance.models.texts import message
from governance.selectors.changes import EXISTS, rollback_items, rule_kind_for

from ._state import lock_change, require_action
from .propose import rule_change_create
from .spec import EditSpec, value_from_json


@transaction.atomic
def rule_change_rollback(
    *,
    change: RuleChange,
    user: User,
    reason: str,
    choices: dict[int, str] | None = None,
    title: str = "",
    ticket: str = "",
    confirmation_reason: str = "",
    now: dt.datetime | None = None,
) -> RuleChange:
    """Propose a new change that restores the fields ``change`` touched to their values
    before it. A field that a later change touched since is a conflict: ``choices`` must
    say, per edit id, whether to keep the current value or restore the old one."""
    change = lock_change(change)
    require_action(change, user=user, action=ChangeAction.ROLL_BACK)
    pending = change.rollbacks.filter(
        status__in=[ChangeStatus.DRAFT, ChangeStatus.PROPOSED, ChangeStatus.APPROVED]
    ).first()
    if pending is not None:
        raise ValidationError(
            _("Change #%(id)d already proposes to roll it back.") % {"id": pending.pk}
        )
    choices = choices or {}
    specs: list[EditSpec] = []
    undecided: list[str] = []
    for item in rollback_items(change=change):
        if not item.needed:
            continue
        if item.conflict:
            choice = choices.get(item.edit.pk)
            if choice == ConflictChoice.KEEP:
                continue
            if choice != ConflictChoice.RESTORE:
                undecided.append(str(item.edit.pk))
                continue
        specs.append(_restore_spec(item.edit))
    if undecided:
        raise ValidationError(
            {
                "choices": _(
                    "A later change touched these fields since: choose, field by field, "
                    "whether to keep the current value or restore the old one."
                )
            },
            code="conflict",
        )
    if not specs:
        raise ValidationError(_("Nothing to roll back: every field already has its old value."))
    return rule_change_create(
        user=user,
        reason=reason,
        edits=specs,
        # Shown in the reader's language (governance.models.texts).
        title=title
        or message(
            gettext_noop("Roll back #%(id)d: %(title)s"),
            id=change.pk,
            title=change.title_message or change.title,
        ),
        ticket=ticket or change.ticket,
        observation_days=change.observation_days,
        rollback_condition=gettext_noop(
            "Roll this rollback back if the reason for change #%(id)d holds again."
        )
        % {"id": change.pk},
        confirmation_reason=confirmation_reason,
        rollback_of=change,
        now=now,
    )


def _restore_spec(edit: RuleEdit) -> EditSpec:
    model = edit.content_type.model_class()
    assert model is not None
    target = model._default_manager.filter(pk=edit.object_id).first()
    if target is None and edit.field == EXISTS and edit.old_value is not None:
        # Restoring an object a change deleted: it is created again (with a new id).
        return EditSpec(target=model(), field=EXISTS, value=edit.old_value)
    if target is None:
        raise ValidationError(
            _("%(kind)s #%(id)d no longer exists: its fields cannot be restored.")
            % {"kind": model._meta.verbose_name, "id": edit.object_id}
        )
    kind = rule_kind_for(model)
    keyed = kind.keyed.get(edit.field) if kind is not None else None
    key = keyed.key_model._default_manager.get(pk=edit.key) if keyed is not None else None
    if keyed is not None:
        value = edit.old_value
    else:
        value = value_from_json(model, edit.field, edit.old_value)
    return EditSpec(target=target, field=edit.field, value=value, key=key)
