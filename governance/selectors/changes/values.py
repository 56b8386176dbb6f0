"""How a rule change names objects and stores, reads back and compares field values."""

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import models

from governance.models import (
    GpuFlavor,
    Membership,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PriorityTier,
    Project,
    Quota,
    RuleChange,
    RuleEdit,
    User,
)

# How pages and the API name the kinds of object a change may edit.
OBJECT_TYPES: dict[str, type[models.Model]] = {
    "project": Project,
    "flavor": GpuFlavor,
    "pool": Pool,
    "tier": PriorityTier,
    "preemption_class": PreemptionClass,
    "quota": Quota,
    "user": User,
}
TYPE_OF_MODEL = {model: name for name, model in OBJECT_TYPES.items()}
CAPACITY, MEMBERSHIP = "capacity", "membership"
# The pseudo-field of a kind registered with ``services.changes.registry``: ``None`` while
# the object does not exist, a snapshot of ``SNAPSHOT_FIELDS`` while it does.
EXISTS = "exists"
# Filled by the registry: the unique field that names an object (default: its slug) and
# the fields a creation or a deletion records.
# How URLs name an object: its slug unless listed here (a quota is named by its id).
KEY_FIELDS: dict[type[models.Model], str] = {User: "username"}
SNAPSHOT_FIELDS: dict[type[models.Model], tuple[str, ...]] = {}


def object_type_of(model: type[models.Model]) -> str:
    return TYPE_OF_MODEL.get(model, model._meta.model_name or "")


def object_key(obj: models.Model) -> str:
    """How URLs name the object: the id of a quota, the slug of anything else."""
    if isinstance(obj, Quota):
        return str(obj.pk)
    return str(getattr(obj, KEY_FIELDS.get(type(obj), "slug")))


def object_lookup(object_type: str, key: str) -> models.Model | None:
    """The object named ``<type>:<key>`` in filters, or ``None``."""
    model = OBJECT_TYPES.get(object_type)
    if model is None:
        return None
    try:
        if model is Quota:
            return model._default_manager.filter(pk=int(key)).first()
        return model._default_manager.filter(**{KEY_FIELDS.get(model, "slug"): key}).first()
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
    if isinstance(obj, Pool) and name == CAPACITY:
        gpus = PoolCapacity.objects.filter(pool=obj, flavor_id=key).values_list("gpus", flat=True)
        return gpus.first() or 0
    if isinstance(obj, Project) and name == MEMBERSHIP:
        if key is None:
            return None
        return (
            Membership.objects.filter(project=obj, user__pk=key)
            .values_list("role", flat=True)
            .first()
        )
    if name == EXISTS:
        return snapshot(obj)
    field = model_field(type(obj), name)
    if field.many_to_many:
        return sorted(getattr(obj, name).values_list("pk", flat=True))
    return value_to_json(type(obj), name, getattr(obj, field.attname))


def snapshot(obj: models.Model) -> dict[str, Any]:
    """What a creation or a deletion of ``obj`` records: its fields as JSON."""
    return {name: current_value(obj, name) for name in SNAPSHOT_FIELDS.get(type(obj), ())}


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
