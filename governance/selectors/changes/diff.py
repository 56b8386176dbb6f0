"""A rule change's edits as pages and the API show them: names and display values."""

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import FieldDoesNotExist, ObjectDoesNotExist
from django.db import models
from django.db.models import QuerySet
from django.utils import formats
from django.utils.text import capfirst
from django.utils.translation import gettext as _

from governance.models import EditKind, RuleChange, RuleEdit

from .kinds import EXISTS, KeyedField, rule_kind_for
from .values import model_field, object_key, object_type_of

EMPTY = "—"


@dataclass(frozen=True)
class EditRow:
    """One edit as pages and the API show it."""

    edit: RuleEdit
    object_type: str
    object_key: str
    object_name: str
    object_url: str
    field: str
    field_label: str
    kind: str
    kind_label: str
    old: str
    new: str
    current: str = ""


def edit_rows(changes: Iterable[RuleChange]) -> dict[int, list[EditRow]]:
    """Every edit of ``changes`` with names instead of ids.

    Queries: one per kind of object edited, one per kind of related object named in the
    values; never one per change or per edit.
    """
    edits = [edit for change in changes for edit in change.edits.all()]
    return edit_rows_for(edits)


def edit_rows_for(
    edits: Sequence[RuleEdit], current: dict[int, Any] | None = None
) -> dict[int, list[EditRow]]:
    targets: dict[type[models.Model], set[int]] = {}
    related: dict[type[models.Model], set[Any]] = {}
    for edit in edits:
        model = edit.content_type.model_class()
        assert model is not None
        targets.setdefault(model, set()).add(edit.object_id)
        related_model, _label = _related_of(model, edit.field)
        keyed = _keyed(model, edit.field)
        if edit.key is not None and keyed is not None:
            related.setdefault(keyed.key_model, set()).add(edit.key)
        if related_model is not None:
            values = [edit.old_value, edit.new_value]
            if current and edit.pk in current:
                values.append(current[edit.pk])
            for value in values:
                if isinstance(value, list):
                    related.setdefault(related_model, set()).update(value)
                elif value is not None:
                    related.setdefault(related_model, set()).add(value)
    objects = {model: _named(model).in_bulk(ids) for model, ids in targets.items() if ids}
    names = {
        model: {pk: str(obj) for pk, obj in _named(model).in_bulk(ids).items()}
        for model, ids in related.items()
        if ids
    }
    rows: dict[int, list[EditRow]] = {}
    for edit in edits:
        model = edit.content_type.model_class()
        assert model is not None
        obj = objects.get(model, {}).get(edit.object_id) if edit.object_id else None
        rows.setdefault(edit.change_id, []).append(
            EditRow(
                edit=edit,
                object_type=object_type_of(model),
                object_key=object_key(obj) if obj is not None else str(edit.object_id),
                object_name=str(obj) if obj is not None else _absent_name(model, edit),
                object_url=obj.get_absolute_url() if obj is not None else "",  # type: ignore[attr-defined]
                field=edit.field,
                field_label=_field_label(model, edit, names),
                kind=edit.kind,
                kind_label=str(EditKind(edit.kind).label),
                old=display_value(model, edit.field, edit.old_value, names),
                new=display_value(model, edit.field, edit.new_value, names),
                current=(
                    display_value(model, edit.field, current[edit.pk], names)
                    if current and edit.pk in current
                    else ""
                ),
            )
        )
    return rows


def _absent_name(model: type[models.Model], edit: RuleEdit) -> str:
    """The name of an object that does not exist (yet, or any more)."""
    if edit.field == EXISTS:
        recorded = edit.new_value or edit.old_value or {}
        kind = rule_kind_for(model)
        key_field = kind.key_field if kind is not None else "slug"
        name = recorded.get(key_field) if isinstance(recorded, dict) else None
        if not name and isinstance(recorded, dict):
            # A row named by its relations (a quota: project · pool · flavor).
            name = _unsaved_name(model, recorded)
        if name:
            if not edit.object_id:
                return _("%(name)s (to be created)") % {"name": name}
            return _("%(name)s (deleted)") % {"name": name}
    return _("deleted (#%(id)s)") % {"id": edit.object_id}


def _unsaved_name(model: type[models.Model], recorded: dict[str, Any]) -> str:
    """The name the object a snapshot records would have (its ``__str__``), or ""."""
    values: dict[str, Any] = {}
    for name, value in recorded.items():
        field = model_field(model, name)
        if field is None or field.many_to_many or not hasattr(field, "attname"):
            continue
        values[field.attname] = value
    try:
        return str(model(**values))
    except (LookupError, TypeError, ValueError, ObjectDoesNotExist):
        return ""


def _named(model: type[models.Model]) -> QuerySet[Any]:
    """Rows of ``model`` with what their names need (a quota names its project, pool, flavor)."""
    kind = rule_kind_for(model)
    if kind is not None and kind.name_related:
        return model._default_manager.select_related(*kind.name_related)
    return model._default_manager.all()


def _keyed(model: type[models.Model], name: str) -> KeyedField | None:
    kind = rule_kind_for(model)
    return kind.keyed.get(name) if kind is not None else None


def _related_of(model: type[models.Model], name: str) -> tuple[type[models.Model] | None, str]:
    if _keyed(model, name) is not None:
        return None, name
    try:
        field = model._meta.get_field(name)
    except FieldDoesNotExist:
        return None, name
    return (field.related_model if field.is_relation else None), str(
        getattr(field, "verbose_name", name)
    )


def _field_label(
    model: type[models.Model], edit: RuleEdit, names: dict[type[models.Model], dict[Any, str]]
) -> str:
    keyed = _keyed(model, edit.field)
    if keyed is not None:
        key_name = names.get(keyed.key_model, {}).get(edit.key, edit.key)
        return _(keyed.label) % {keyed.key_name: key_name}
    if edit.field == EXISTS:
        return _("Exists (all its settings)")
    return capfirst(_related_of(model, edit.field)[1])


# A limit left empty means "no limit": shown as the lists show it, never as a dash that reads
# as zero.
NO_LIMIT = "∞"


def _is_limit(name: str) -> bool:
    return name.endswith("_limit") or (name.startswith("max_") and "interval" not in name)


def display_value(
    model: type[models.Model],
    name: str,
    value: Any,
    names: dict[type[models.Model], dict[Any, str]],
) -> str:
    keyed = _keyed(model, name)
    if keyed is not None and (value is not None or keyed.display_empty):
        return keyed.display(value)
    if name == EXISTS:
        if not isinstance(value, dict):
            return _("absent")
        shown = []
        for key, item in value.items():
            if item in ("", None, []):
                continue
            text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
            shown.append(f"{key}={text if len(text) <= 80 else text[:79] + '…'}")
        return "; ".join(shown)
    if value is None and _is_limit(name):
        return NO_LIMIT
    if value is None or value == "" or value == []:
        return EMPTY
    field = model_field(model, name)
    if field is None:
        return str(value)
    if field.is_relation:
        known = names.get(field.related_model, {})
        ids = value if isinstance(value, list) else [value]
        return ", ".join(sorted(known.get(pk) or _("deleted (#%(id)s)") % {"id": pk} for pk in ids))
    if field.choices:
        return str(dict(field.flatchoices).get(value, value))
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(field, models.DateField) and isinstance(value, str):
        try:
            return formats.localize(dt.date.fromisoformat(value))
        except ValueError:
            return value
    return str(value)
