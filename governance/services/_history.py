"""Saving governed rows so that every history row carries a user and a reason."""

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext as _

from governance.models import User

REASON_MAX_LENGTH = 1000


def require_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": _("Say why: a reason is required for every change.")})
    if len(reason) > REASON_MAX_LENGTH:
        raise ValidationError(
            {
                "reason": _("Keep the reason under %(limit)d characters (it has %(length)d).")
                % {"limit": REASON_MAX_LENGTH, "length": len(reason)}
            }
        )
    return reason


def apply_fields(obj: models.Model, data: dict[str, Any], allowed: Iterable[str]) -> list[str]:
    """Set the allowed fields of ``obj`` from ``data``; return the names that changed."""
    allowed = set(allowed)
    unknown = set(data) - allowed
    if unknown:
        raise ValidationError(
            {name: _("This field cannot be changed here.") for name in sorted(unknown)}
        )
    changed = []
    for name, value in data.items():
        if getattr(obj, name) != value:
            setattr(obj, name, value)
            changed.append(name)
    return changed


def governed_save(obj: models.Model, *, user: User, reason: str) -> None:
    """``full_clean()`` then ``save()``, with the history row's user and reason set."""
    obj.full_clean()
    obj._history_user = user  # type: ignore[attr-defined]
    obj._change_reason = require_reason(reason)  # type: ignore[attr-defined]
    obj.save()
