"""A proposed change's rollback trigger, checked: it parses and names a tier, project or pool
that exists (``governance.models.triggers``); stored in its canonical form."""

from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from governance.models import Pool, PriorityTier, Project, TriggerScope, parse_trigger

_SCOPE_NAMES = {
    TriggerScope.TIER: lambda: _("tier"),
    TriggerScope.PROJECT: lambda: _("project"),
    TriggerScope.POOL: lambda: _("pool"),
}


def rollback_trigger_clean(text: str) -> str:
    """The canonical form of ``text`` ("" when empty); ``ValidationError`` on the
    ``rollback_trigger`` field when it does not parse or names nothing that exists."""
    if not (text or "").strip():
        return ""
    try:
        trigger = parse_trigger(text)
    except ValidationError as error:
        raise ValidationError({"rollback_trigger": error.messages}) from error
    named: QuerySet[Any] | None = {
        TriggerScope.TIER: PriorityTier.objects.all(),
        TriggerScope.PROJECT: Project.objects.all(),
        TriggerScope.POOL: Pool.objects.all(),
    }.get(TriggerScope(trigger.scope))
    if named is not None and not named.filter(slug=trigger.target).exists():
        raise ValidationError(
            {
                "rollback_trigger": _("No %(scope)s has the slug “%(slug)s”.")
                % {"scope": _SCOPE_NAMES[TriggerScope(trigger.scope)](), "slug": trigger.target}
            }
        )
    return trigger.text
