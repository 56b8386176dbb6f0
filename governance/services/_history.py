"""The one reasoned save: every history row of a governed model carries a user and a reason.

``governed_save`` and ``governed_delete`` are the only places that set the history user and
reason (``governance.services`` exports them, and ``approvals`` and ``queues`` use them too);
``require_reason`` and ``require_text`` are the one check of a reason and of a free text.
"""

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext as _

from governance.models import User

# A reason (for a change, a rejection, a revocation) and a longer free text (a request's
# justification). The forms use the same limits.
REASON_MAX_LENGTH = 1000
TEXT_MAX_LENGTH = 2000


def require_text(value: str, *, field: str, message: str, limit: int = TEXT_MAX_LENGTH) -> str:
    """``value`` stripped; a ``ValidationError`` on ``field`` when it is empty or too long."""
    value = (value or "").strip()
    if not value:
        raise ValidationError({field: message})
    if len(value) > limit:
        raise ValidationError(
            {
                field: _("Keep it under %(limit)d characters (it has %(length)d).")
                % {"limit": limit, "length": len(value)}
            }
        )
    return value


def require_reason(reason: str, *, message: str = "") -> str:
    return require_text(
        reason,
        field="reason",
        message=message or _("Say why: a reason is required for every change."),
        limit=REASON_MAX_LENGTH,
    )


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


def _sign(obj: models.Model, *, user: User, reason: str) -> None:
    obj._history_user = user  # type: ignore[attr-defined]
    obj._change_reason = require_reason(reason)  # type: ignore[attr-defined]


def governed_save(obj: models.Model, *, user: User, reason: str) -> None:
    """``full_clean()`` then ``save()``, with the history row's user and reason set."""
    obj.full_clean()
    _sign(obj, user=user, reason=reason)
    obj.save()


def governed_delete(obj: models.Model, *, user: User, reason: str) -> None:
    """``delete()``, with the history row's user and reason set."""
    _sign(obj, user=user, reason=reason)
    obj.delete()
