"""Small formatting helpers shared by the review's tables, figures and comparison."""

from datetime import date
from typing import Any

from django.apps import apps
from django.utils import formats, timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _
from django.utils.translation import override

from governance.models import GrantKind, PreemptionKind
from governance.models.texts import message_text, stored_text
from queues.models import WaitCategory


def minutes(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds / 60, 1)


def percent(share: float | None) -> float | None:
    return None if share is None else round(share * 100, 1)


def row_name(row: dict[str, Any], key: str) -> str:
    return row.get("name") or row.get(key) or _("None")


def category_label(row: dict[str, Any]) -> str:
    """The wait category in the reader's language (the stored label is the builder's)."""
    labels = dict(WaitCategory.choices)
    return str(labels.get(row["category"], row.get("label") or row["category"]))


def kind_label(kind: str) -> str:
    return str(dict(GrantKind.choices).get(kind, kind))


def tier_names(metrics: dict[str, Any]) -> dict[Any, str]:
    return {row["tier"]: row["name"] for row in metrics["waits"]["by_tier"]}


def timeline_title(item: dict[str, Any]) -> str:
    """A timeline item's title in the reader's language: from its message; in a review built
    before titles were stored as messages, from the English title (a change's generated
    title, or a grant's "<kind> · <project>")."""
    if item.get("title_message"):
        return message_text(item["title_message"], item.get("title", ""))
    title = str(item.get("title", ""))
    if item.get("kind") == "grant":
        kind, sep, project = title.partition(" · ")
        with override("en"):
            english = {str(text): value for value, text in GrantKind.choices}
        if sep and kind in english:
            return f"{kind_label(english[kind])} · {project}"
        return title
    return stored_text(title)


def timeline_object(item: dict[str, Any]) -> str:
    """What a timeline item touched: a change's kinds of rule in the reader's language (stored
    as model names, "pool, quota"), a grant's project slug as it is."""
    if item.get("kind") != "change":
        return str(item.get("object", ""))
    models = {m._meta.model_name: m for m in apps.get_app_config("governance").get_models()}
    names = []
    for name in str(item.get("object", "")).split(", "):
        model = models.get(name)
        names.append(str(model._meta.verbose_name) if model is not None else name)
    return _(", ").join(names)


def timeline_kind(kind: str) -> str:
    return _("Rule change") if kind == "change" else _("Grant")


def class_label(row: dict[str, Any]) -> str:
    """A preemption class as the reader's language names its kind ("Cautious", not
    "Cautious (cautious)"); its slug only when the kind is not stored."""
    slug = row.get("preemption_class")
    if not slug:
        return str(_("None"))
    kind = row.get("class_kind")
    if not kind:
        return slug
    return str(dict(PreemptionKind.choices).get(kind, kind))


def day_label(day: str, *, human: bool) -> str:
    """A stored ISO day, as the reader's locale writes a date when ``human``."""
    if not human:
        return day
    try:
        return formats.date_format(date.fromisoformat(day), "DATE_FORMAT")
    except ValueError:
        return day


def when_label(at: str, *, human: bool) -> str:
    """A stored ISO time, in the site's time zone as the reader's locale writes it."""
    parsed = parse_datetime(at) if human else None
    if parsed is None:
        return at
    return formats.date_format(timezone.localtime(parsed), "DATETIME_FORMAT")
