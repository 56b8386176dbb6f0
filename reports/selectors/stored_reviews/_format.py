"""Small formatting helpers shared by the review's tables, figures and comparison."""

from typing import Any

from django.utils.translation import gettext as _

from governance.models import GrantKind
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


def timeline_kind(kind: str) -> str:
    return _("Rule change") if kind == "change" else _("Grant")
