"""How a rule change names objects and stores, reads back and compares field values."""

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import models

from governance.models import RuleChange, RuleEdit

from .kinds import EXISTS, rule_kind_for, rule_kind_named


def object_type_of(model: type[models.Model]) -> str:
    kind = rule_kind_for(model)
    return kind.object_type if kind is not None else model._meta.model_name or ""


def object_key(obj: models.Model) -> str:
    """How URLs name the object: its kind's key field (a slug, a name, a quota's id)."""
    kind = rule_kind_for(type(obj))
    return str(getattr(obj, kind.key_field if kind is not None else "slug"))


def object_lookup(object_type: str, key: str) -> models.Model | None:
    """The object named ``<type>:<key>`` in filters, or ``None``."""
    kind = rule_kind_named(object_type)
    if kind is None:
        return None
    try:
        return kind.model._default_manager.filter(**{kind.key_field: key}).first()
    except (ValueError, TypeError):
        return None


# --- values --------------------------------------------------------------------------------


def model_field(model: type[models.Model], name: str) -> Any:
    """The model field ``name``, or ``None`` for a keyed field (capacity, membership)."""
    try:
        return model._meta.get_field(name)
    except FieldDoesNotExist:
        return None


def value_to_json(model: type[models.Model], name: str, value: Any) -> Any:
    """A value as a change stores it: ids for relations, ISO dates, plain JSON otherwise."""
    field = model_field(model, name)
    if field is not None and field.many_to_many:
        return sorted(item.pk if isinstance(item, models.Model) else int(item) for item in value)
    if isinstance(value, models.Model):
        return value.pk
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def current_value(obj: models.Model, name: str, key: int | None = None) -> Any:
    """The stored value of ``obj.name`` now, as JSON."""
    if name == EXISTS:
        return snapshot(obj)
    kind = rule_kind_for(type(obj))
    keyed = kind.keyed.get(name) if kind is not None else None
    if keyed is not None:
        return keyed.current(obj, key)
    field = model_field(type(obj), name)
    if field.many_to_many:
        return sorted(getattr(obj, name).values_list("pk", flat=True))
    return value_to_json(type(obj), name, getattr(obj, field.attname))


def snapshot(obj: models.Model) -> dict[str, Any]:
    """What a creation or a deletion of ``obj`` records: its fields as JSON."""
    kind = rule_kind_for(type(obj))
    fields = kind.snapshot_fields if kind is not None else ()
    return {name: current_value(obj, name) for name in fields}


def stale_edits(*, change: RuleChange) -> list[tuple[RuleEdit, Any]]:
    """The edits whose field no longer holds the value the change recorded as "before"."""
    stale = []
    for edit in change.edits.select_related("content_type").order_by("pk"):
        model = edit.content_type.model_class()
        assert model is not None
        obj = model._default_manager.filter(pk=edit.object_id).first()
        now_value = None if obj is None else current_value(obj, edit.field, edit.key)
        # An absent object is stale, unless the edit creates it (``exists`` was ``None``).
        if (obj is None and edit.field != EXISTS) or now_value != edit.old_value:
            stale.append((edit, now_value))
    return stale


@dataclass(frozen=True)
class RollbackItem:
    """One field a rollback would restore: its value before the change, after it, and now."""

    edit: RuleEdit
    restore: Any  # the value before the change
    applied: Any  # the value the change set
    current: Any  # the value now

    @property
    def conflict(self) -> bool:
        """A later change touched the field: restoring would overwrite it."""
        return self.current != self.applied

    @property
    def needed(self) -> bool:
        return self.current != self.restore


def rollback_items(*, change: RuleChange) -> list[RollbackItem]:
    items = []
    for edit in change.edits.select_related("content_type").order_by("pk"):
        model = edit.content_type.model_class()
        assert model is not None
        obj = model._default_manager.filter(pk=edit.object_id).first()
        current = None if obj is None else current_value(obj, edit.field, edit.key)
        items.append(
            RollbackItem(edit=edit, restore=edit.old_value, applied=edit.new_value, current=current)
        )
    return items
