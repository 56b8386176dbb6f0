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
from ..people import USER_EDITABLE
from ..pools import POOL_EDITABLE
from ..preemption import PREEMPTION_CLASS_EDITABLE
from ..projects import PROJECT_EDITABLE
from ..quotas import QUOTA_EDITABLE
from ..tiers import TIER_EDITABLE

CAPACITY = "capacity"  # keyed field of a pool: GPUs per flavor (key: the flavor id)
MEMBERSHIP = "membership"  # keyed field of a project: a user's role (key: the user id)
# ``EXISTS`` (imported above): the pseudo-field that creates or deletes an object of a
# registered rule kind: ``None`` (absent) or a snapshot of its fields (see ``registry``).
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
    # People: site role, activation and (revoking) superuser status, approved by ops.
    User: _kinds(USER_EDITABLE, EditKind.ACCESS),
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


def _bad(name: str, message: str) -> ValidationError:
    return ValidationError({name: [message]})


def value_clean(model: type[models.Model], name: str, value: Any) -> Any:
    """``value`` checked against the field's type and validators, as the service takes it.

    Nothing is coerced: ``2.7`` or ``True`` for a whole number, ``"12abc"`` or ``{}`` for a
    number and a JSON object for a text are refused with the field named, so a change never
    records a value that its apply would store differently (or fail to store).
    """
    field = model_field(model, name)
    if field is None:
        return value
    if value is None:
        if not field.null:
            raise _bad(name, _("This field cannot be empty."))
        return None
    if field.many_to_many:
        related = field.related_model
        if isinstance(value, (str, bytes, dict)) or not all(
            isinstance(item, related) for item in _iterable(value)
        ):
            raise _bad(name, _("Choose from the list."))
        return list(value)
    if field.is_relation:
        if not isinstance(value, field.related_model):
            raise _bad(name, _("Choose from the list."))
        return value
    if isinstance(field, models.BooleanField):
        if not isinstance(value, bool):
            raise _bad(name, _("Enter true or false."))
    elif isinstance(field, models.IntegerField):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(name, _("Enter a whole number."))
    elif isinstance(field, models.DateField):
        if isinstance(value, str):
            try:
                value = dt.date.fromisoformat(value)
            except ValueError:
                raise _bad(name, _("Enter a date as YYYY-MM-DD.")) from None
        elif not isinstance(value, dt.date) or isinstance(value, dt.datetime):
            raise _bad(name, _("Enter a date as YYYY-MM-DD."))
    elif isinstance(field, (models.CharField, models.TextField)):
        if not isinstance(value, str):
            raise _bad(name, _("Enter text."))
        if "\x00" in value:
            raise _bad(name, _("Null characters are not allowed."))
    try:
        field.validate(value, None)
        field.run_validators(value)
    except ValidationError as error:
        raise ValidationError({name: error.messages}) from None
    return value


def _iterable(value: Any) -> Iterable[Any]:
    try:
        return list(value)
    except TypeError:
        return [object()]
