"""Creating and proposing rule changes: the edits recorded, the plan checked by a dry run."""

import datetime as dt
from collections.abc import Sequence
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from governance.models import ChangeAction, ChangeStatus, RuleChange, RuleEdit, User
from governance.models.texts import (
    GENERATED_TITLE,
    Message,
    label,
    message,
    message_english,
    message_text,
)
from governance.selectors.changes import (
    EXISTS,
    RuleKind,
    current_value,
    model_field,
    rule_change_warning_messages,
    rule_kind_for,
    value_to_json,
)

from .._access import dry_run, is_directory_proposal
from .._history import governed_save, require_reason
from ._state import lock_change, require_action
from .apply import apply_edits
from .spec import TITLE_MAX_LENGTH, EditSpec, value_clean
from .trigger import rollback_trigger_clean


def _owns(user: User, target: models.Model) -> bool:
    """Whether ``user`` is the owner (``RuleKind.owner_field``) of the existing ``target``."""
    kind = rule_kind_for(type(target))
    if kind is None or kind.owner_field is None or target.pk is None:
        return False
    owned = {"pk": target.pk, kind.owner_field: user}
    return bool(type(target)._default_manager.filter(**owned).exists())


def _require_may_propose(user: User, edits: Sequence[EditSpec]) -> None:
    if user.is_ops or is_directory_proposal():
        return
    if edits and all(_owns(user, edit.target) for edit in edits):
        return
    raise PermissionDenied(
        _("Only ops, or the business owner of a tier for that tier, may propose rule changes.")
    )


def _edit_rows(
    change: RuleChange, edits: Sequence[EditSpec]
) -> tuple[list[RuleEdit], list[EditSpec]]:
    """The rows of the edits that change a value, and those edits."""
    rows: list[RuleEdit] = []
    changed: list[EditSpec] = []
    seen: set[tuple[int, int, str, int | None]] = set()
    stored: dict[tuple[type[models.Model], Any], models.Model] = {}
    errors: dict[str, list[str]] = {}
    for edit in edits:
        model = type(edit.target)
        kind = rule_kind_for(model)
        edit_kind = kind.edit_kind(edit.field) if kind is not None else None
        if kind is None or edit_kind is None:
            errors.setdefault(edit.field, []).append(_("This field cannot be changed here."))
            continue
        keyed = kind.keyed.get(edit.field)
        key = None
        if keyed is not None:
            if not isinstance(edit.key, keyed.key_model):
                errors.setdefault(edit.field, []).append(_("Say which entry to change."))
                continue
            key = edit.key.pk
            try:
                new = keyed.clean(edit.value)
            except ValidationError as error:
                for name, messages in error.message_dict.items():
                    errors.setdefault(name, []).extend(messages)
                continue
        elif edit.field == EXISTS:
            new = edit.value
            if new is not None and not isinstance(new, dict):
                errors.setdefault(edit.field, []).append(_("This field cannot be changed here."))
                continue
        else:
            try:
                new = value_to_json(model, edit.field, value_clean(model, edit.field, edit.value))
            except ValidationError as error:
                for name, messages in error.message_dict.items():
                    errors.setdefault(name, []).extend(messages)
                continue
        if edit.target.pk is None:
            # An object a change creates: it does not exist before (its id is 0 until then).
            if edit.field != EXISTS:
                errors.setdefault(edit.field, []).append(_("This field cannot be changed here."))
                continue
            old = None
        else:
            fresh = stored.get((model, edit.target.pk))
            if fresh is None:
                # The stored row, not the caller's copy: "before" is what the database holds.
                fresh = stored[(model, edit.target.pk)] = model._default_manager.get(
                    pk=edit.target.pk
                )
            old = current_value(fresh, edit.field, key)
        if old == new:
            continue
        object_id = edit.target.pk or 0
        identity = (ContentType.objects.get_for_model(model).pk, object_id, edit.field, key)
        if identity in seen:
            errors.setdefault(edit.field, []).append(_("A change edits each field once."))
            continue
        seen.add(identity)
        changed.append(edit)
        rows.append(
            RuleEdit(
                change=change,
                content_type_id=identity[0],
                object_id=object_id,
                field=edit.field,
                key=key,
                kind=edit_kind,
                old_value=old,
                new_value=new,
            )
        )
    if errors:
        raise ValidationError(errors)
    return rows, changed


def _default_title(edits: Sequence[EditSpec]) -> Message:
    """The objects and the fields that change, as a message: stored so (and in English in
    ``title``), and shown in the reader's language (``RuleChange.display_title``)."""
    targets = list(dict.fromkeys(str(edit.target) for edit in edits))
    fields = list({repr(label): label for label in map(_field_label, edits)}.values())
    return message(GENERATED_TITLE, objects=", ".join(targets), fields=fields)


def _field_label(edit: EditSpec) -> Any:
    kind = rule_kind_for(type(edit.target))
    keyed = kind.keyed.get(edit.field) if kind is not None else None
    if keyed is not None:
        return message(keyed.title, **{keyed.key_name: edit.key})
    if edit.field == EXISTS:
        return message(
            gettext_noop("created") if edit.value is not None else gettext_noop("deleted")
        )
    field = model_field(type(edit.target), edit.field)
    return label(field.verbose_name) if field is not None else edit.field


def _titled(change: RuleChange, title: str | Message) -> None:
    """Give ``change`` its title: typed text as it is, a message in English beside it."""
    if isinstance(title, dict):
        change.title_message = title
        title = message_english(title)
    else:
        change.title_message = None
    title = title.strip()
    change.title = title[: TITLE_MAX_LENGTH - 1] + "…" if len(title) > TITLE_MAX_LENGTH else title


@transaction.atomic
def rule_change_create(
    *,
    user: User,
    reason: str,
    edits: Sequence[EditSpec],
    title: str | Message = "",
    ticket: str = "",
    observation_days: int | None = None,
    rollback_condition: str = "",
    rollback_trigger: str = "",
    confirmation_reason: str = "",
    rollback_of: RuleChange | None = None,
    submit: bool = True,
    now: dt.datetime | None = None,
) -> RuleChange:
    """Record a change of the given edits (only the fields whose value differs).

    With ``submit`` (the default) the change is proposed at once, which checks its plan;
    otherwise it stays a draft. Raises ``ValidationError`` when nothing would change.
    """
    _require_may_propose(user, edits)
    change = RuleChange(
        reason=require_reason(reason),
        ticket=(ticket or "").strip(),
        author=user,
        rollback_condition=(rollback_condition or "").strip(),
        rollback_trigger=rollback_trigger_clean(rollback_trigger),
        rollback_of=rollback_of,
    )
    if observation_days is not None:
        change.observation_days = observation_days
    rows, changed = _edit_rows(change, edits)
    if not rows:
        raise ValidationError(
            _("Nothing would change: every field already has the value asked for.")
        )
    # A generated title names only the fields that change, not every field of the form.
    _titled(change, title if isinstance(title, dict) or title.strip() else _default_title(changed))
    # The history of a change tells why with its author's reason, not the step's name.
    governed_save(change, user=user, reason=change.reason or gettext_noop("Created"))
    for row in rows:
        row.full_clean(exclude=["change", "content_type"], validate_constraints=False)
    RuleEdit.objects.bulk_create(rows)
    if submit:
        change = rule_change_propose(
            change=change, user=user, confirmation_reason=confirmation_reason, now=now
        )
    return change


def _dry_run(change: RuleChange, user: User) -> None:
    """Apply the change in a savepoint and undo it: the services' checks run on the real
    rows, so an overcommitted pool or an unsafe tier is refused when proposed."""

    class _Undo(Exception):
        pass

    try:
        with transaction.atomic(), dry_run():
            apply_edits(change, user=user)
            raise _Undo
    except _Undo:
        pass


@transaction.atomic
def rule_change_propose(
    *,
    change: RuleChange,
    user: User,
    confirmation_reason: str = "",
    now: dt.datetime | None = None,
) -> RuleChange:
    """Draft → proposed. A plan that warns (mixed kinds, several pools, inside the
    observation window of an earlier change) needs a confirmation with a reason."""
    change = lock_change(change)
    require_action(change, user=user, action=ChangeAction.PROPOSE)
    now = now or timezone.now()
    # The same checks for everyone who may propose (ops, or a tier's owner for that tier);
    # hard errors first, so that nobody confirms a warning for a plan that cannot apply.
    _dry_run(change, user)
    warnings = rule_change_warning_messages(change=change, now=now)
    confirmation_reason = (confirmation_reason or "").strip()
    if warnings and not confirmation_reason:
        raise ValidationError(
            {
                "confirmation_reason": [
                    *(message_text(warning) for warning in warnings),
                    _("Confirm with a reason to propose it anyway, or split the change."),
                ]
            }
        )
    change.warnings = warnings
    change.confirmation_reason = confirmation_reason if warnings else ""
    change.status = ChangeStatus.PROPOSED
    change.proposed_by = user
    change.proposed_at = now
    governed_save(change, user=user, reason=change.reason or gettext_noop("Proposed"))
    return change


# --- proposing a creation, an update or a deletion of one object -------------------------------
# The one path for every rule kind: the pages, the API and other apps' services (a cluster's)
# call these with the object's values as its services take them; ``change`` holds the
# change's own fields (title, ticket, observation window, rollback condition, confirmation).


def _kind_of(model: type[models.Model]) -> RuleKind:
    kind = rule_kind_for(model)
    if kind is None:
        raise ValidationError(_("This field cannot be changed here."))
    return kind


def _plain(model: type[models.Model], name: str) -> bool:
    """Whether ``name`` is a field set on an instance (not many-to-many, not keyed)."""
    field = model_field(model, name)
    return field is not None and not field.many_to_many


def _refuse_unknown(data: dict[str, Any], allowed: Sequence[str]) -> None:
    unknown = set(data) - set(allowed)
    if unknown:
        raise ValidationError(
            {name: _("This field cannot be changed here.") for name in sorted(unknown)}
        )


def rule_object_propose_create(
    *,
    user: User,
    reason: str,
    model: type[models.Model],
    data: dict[str, Any],
    **change: Any,
) -> RuleChange:
    """Propose creating a ``model`` from ``data`` (its create service's arguments): a change
    whose one edit sets ``exists`` to the snapshot of ``data``, applied once someone else
    approves it."""
    kind = _kind_of(model)
    _refuse_unknown(data, kind.snapshot_fields)
    # The object to be: checked by the kind (if it says how) and named in the title.
    target = model(**{name: value for name, value in data.items() if _plain(model, name)})
    if kind.check is not None:
        kind.check(target)
    snapshot = {name: value_to_json(model, name, value) for name, value in data.items()}
    edit = EditSpec(target=target, field=EXISTS, value=snapshot)
    return rule_change_create(user=user, reason=reason, edits=[edit], **change)


def rule_object_propose_update(
    *, obj: models.Model, user: User, reason: str, data: dict[str, Any], **change: Any
) -> RuleChange:
    """Propose a change of ``obj``'s fields in ``data`` (those whose value differs)."""
    model = type(obj)
    kind = _kind_of(model)
    _refuse_unknown(data, tuple(kind.fields))
    if kind.check is not None:
        checked = model._default_manager.get(pk=obj.pk)
        for name, value in data.items():
            if _plain(model, name):
                setattr(checked, name, value)
        kind.check(checked)
    edits = [EditSpec(target=obj, field=name, value=value) for name, value in data.items()]
    return rule_change_create(user=user, reason=reason, edits=edits, **change)


def rule_object_propose_delete(
    *, obj: models.Model, user: User, reason: str, **change: Any
) -> RuleChange:
    """Propose deleting ``obj`` (a rollback of the change creates it again)."""
    _kind_of(type(obj))
    edit = EditSpec(target=obj, field=EXISTS, value=None)
    return rule_change_create(user=user, reason=reason, edits=[edit], **change)
