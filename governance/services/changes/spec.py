"""What a rule change may edit, and how its values are stored and read back."""

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext as _

from governance.models import (
    EditKind,
    GpuFlavor,
    Pool,
    PreemptionClass,
    PriorityTier,
    Project,
    Quota,
    User,
)
from governance.selectors.changes import EXISTS, model_field

from ..flavors import FLAVOR_EDITABLE
from ..pools import POOL_EDITABLE
from ..preemption import PREEMPTION_CLASS_EDITABLE
from ..projects import PROJECT_EDITABLE
from ..quotas import QUOTA_EDITABLE
from ..tiers import TIER_EDITABLE

CAPACITY = "capacity"  # keyed field of a pool: GPUs per flavor (key: the flavor id)
MEMBERSHIP = "membership"  # keyed field of a project: a user's role (key: the user id)
# ``EXISTS`` (imported above): the pseudo-field that creates or deletes an object of a
# registered rule kind: ``None`` (absent) or a snapshot of its fields (see ``registry``).
KEEP, RESTORE = "keep", "restore"
TITLE_MAX_LENGTH = 200


def _kinds(fields: Iterable[str], kind: EditKind, **overrides: EditKind) -> dict[str, EditKind]:
    return {name: overrides.get(name, kind) for name in fields}


# What may be edited through a change, per model, and what kind of edit each field is.
EDITABLE: dict[type[models.Model], dict[str, EditKind]] = {
    Quota: _kinds(QUOTA_EDITABLE, EditKind.QUOTA, preemption_class=EditKind.PREEMPTION),
    PriorityTier: _kinds(
        (*TIER_EDITABLE, "preemptible_tiers"),
        EditKind.PRIORITY,
        name=EditKind.DESCRIPTION,
        description=EditKind.DESCRIPTION,
    ),
    PreemptionClass: _kinds(
        PREEMPTION_CLASS_EDITABLE, EditKind.PREEMPTION, name=EditKind.DESCRIPTION
    ),
    GpuFlavor: _kinds(FLAVOR_EDITABLE, EditKind.PLACEMENT, name=EditKind.DESCRIPTION),
    Pool: _kinds(
        (*POOL_EDITABLE, CAPACITY),
        EditKind.DESCRIPTION,
        parent=EditKind.CAPACITY,
        capacity=EditKind.CAPACITY,
    ),
    Project: _kinds(
        (*PROJECT_EDITABLE, MEMBERSHIP),
        EditKind.DESCRIPTION,
        tier=EditKind.PRIORITY,
        membership=EditKind.ACCESS,
    ),
}
KEYED = {(Pool, CAPACITY): GpuFlavor, (Project, MEMBERSHIP): User}


@dataclass(frozen=True)
class EditSpec:
    """One edit as a page or the API asks for it: the object, the field and its new value.

    ``value`` is what the rule kind's service takes (a model instance for a foreign key, an
    iterable of instances for a many-to-many field). ``key`` names the entry of a keyed
    field: the flavor of a pool's ``capacity``, the user of a project's ``membership``
    (whose value is a role, or ``None`` to remove the member).
    """

    target: models.Model
    field: str
    value: Any
    key: models.Model | None = None


# --- values ---------------------------------------------------------------------------------


def value_from_json(model: type[models.Model], name: str, value: Any) -> Any:
    """A stored value as the rule kind's service takes it."""
    field = model_field(model, name)
    if name == EXISTS or field is None or value is None:
        return value
    if field.many_to_many:
        related = field.related_model._default_manager.in_bulk(value)
        return [related[pk] for pk in value if pk in related]
    if field.is_relation:
        found = field.related_model._default_manager.filter(pk=value).first()
        if found is None:
            raise ValidationError(
                {
                    name: _("%(kind)s #%(id)s no longer exists.")
                    % {"kind": field.verbose_name, "id": value}
                }
            )
        return found
    if isinstance(field, models.DateField) and isinstance(value, str):
        return dt.date.fromisoformat(value)
    return value
