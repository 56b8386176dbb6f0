"""Rule kinds that other apps add to the change machinery (without ``governance`` importing
them): an app registers, in its ``AppConfig.ready()``, the model, the fields a change may
edit and the services that update, create and delete it. Every registered kind then goes
through the same propose → approve (by someone else) → apply → rollback as the built-in
rules, with the same dry run at proposal.

Creating and deleting an object are edits of its ``exists`` pseudo-field: its value is
``None`` while the object does not exist and a snapshot of its fields (as JSON) while it
does. So a creation is ``None → snapshot``, a deletion ``snapshot → None``, and a rollback
restores the old value like any other field: it deletes what a change created and creates
again what a change deleted. A creation is recorded with object id 0 until it is applied;
applying it writes the new object's id into the edit.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import models

from governance.models import EditKind
from governance.selectors.changes import values

from .spec import EDITABLE, EXISTS


@dataclass(frozen=True)
class RuleKind:
    """A model governed through rule changes, and the services that write it.

    ``update(obj=, user=, reason=, data=)`` takes the changed fields as the model takes
    them (instances for relations); ``create(user=, reason=, data=)`` and ``delete(obj=,
    user=, reason=)`` are optional. ``snapshot_fields`` are what a creation or a deletion
    records (they must be enough to create the object again). ``key_field`` names the
    object in URLs and the API (a unique field).
    """

    model: type[models.Model]
    object_type: str
    fields: dict[str, EditKind]
    update: Callable[..., Any]
    create: Callable[..., models.Model] | None = None
    delete: Callable[..., None] | None = None
    snapshot_fields: tuple[str, ...] = ()
    key_field: str = "slug"
    exists_kind: EditKind = EditKind.CAPACITY


REGISTRY: dict[type[models.Model], RuleKind] = {}


def rule_kind_register(kind: RuleKind) -> None:
    """Make ``kind.model`` editable through rule changes (idempotent)."""
    fields = dict(kind.fields)
    if kind.create is not None or kind.delete is not None:
        fields[EXISTS] = kind.exists_kind
    REGISTRY[kind.model] = kind
    EDITABLE[kind.model] = fields
    values.OBJECT_TYPES[kind.object_type] = kind.model
    values.TYPE_OF_MODEL[kind.model] = kind.object_type
    values.KEY_FIELDS[kind.model] = kind.key_field
    values.SNAPSHOT_FIELDS[kind.model] = tuple(kind.snapshot_fields)


def rule_kind_for(model: type[models.Model]) -> RuleKind | None:
    return REGISTRY.get(model)
