"""What a rule change may edit, and how its values are stored and read back."""

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext as _

from governance.selectors.changes import EXISTS, model_field

# ``EXISTS`` (imported above): the pseudo-field that creates or deletes an object (see
# ``selectors.changes.kinds``).
TITLE_MAX_LENGTH = 200


@dataclass(frozen=True)
class EditSpec:
    """One edit as a page or the API asks for it: the object, the field and its new value.

    ``value`` is what the rule kind's service takes (a model instance for a foreign key, an
    iterable of instances for a many-to-many field). ``key`` names the entry of a keyed
    field (``RuleKind.keyed``): the flavor of a pool's ``capacity``, the user of a
    project's ``membership`` (whose value is a role, or ``None`` to remove the member).
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
