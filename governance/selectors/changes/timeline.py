"""The timeline of rule changes: listing, filtering and fetching them."""

import datetime as dt
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ObjectDoesNotExist
from django.db import models
from django.db.models import Prefetch, QuerySet
from django.http import Http404
from django.utils.translation import gettext_lazy

from governance.models import RuleChange, RuleEdit, User

from ..lists import Sorts, sorted_by
from ..rules import user_can_read_rules

CHANGE_SORTS: Sorts = {
    "-created_at": (gettext_lazy("Newest first"), ("-created_at", "-pk")),
    "created_at": (gettext_lazy("Oldest first"), ("created_at", "pk")),
}


def rule_change_list(
    *,
    status: str | None = None,
    kind: str | None = None,
    target: models.Model | None = None,
    author: User | None = None,
    since: dt.date | None = None,
    until: dt.date | None = None,
    sort: str | None = None,
) -> QuerySet[RuleChange]:
    """The timeline: changes with their people and edits (a fixed number of queries),
    filtered as pages and the API ask, newest first unless ``sort`` says otherwise."""
    changes = rule_change_filter(
        RuleChange.objects.select_related(
            "author", "proposed_by", "approved_by", "applied_by", "closed_by", "rollback_of"
        ).prefetch_related(
            Prefetch(
                "edits", queryset=RuleEdit.objects.select_related("content_type").order_by("pk")
            )
        ),
        status=status,
        kind=kind,
        target=target,
        author=author,
        since=since,
        until=until,
    )
    return sorted_by(changes, sort=sort, sorts=CHANGE_SORTS)


def rule_change_filter(
    queryset: QuerySet[RuleChange],
    *,
    status: str | None = None,
    kind: str | None = None,
    target: models.Model | None = None,
    author: User | None = None,
    since: dt.date | None = None,
    until: dt.date | None = None,
) -> QuerySet[RuleChange]:
    if status:
        queryset = queryset.filter(status=status)
    edits = RuleEdit.objects.all()
    if kind:
        edits = edits.filter(kind=kind)
    if target is not None:
        edits = edits.filter(
            content_type=ContentType.objects.get_for_model(type(target)), object_id=target.pk
        )
    if kind or target is not None:
        # A subquery, not a join: no duplicate rows, so no DISTINCT over the whole page.
        queryset = queryset.filter(pk__in=edits.values("change_id"))
    if author is not None:
        queryset = queryset.filter(author=author)
    if since is not None:
        queryset = queryset.filter(created_at__date__gte=since)
    if until is not None:
        queryset = queryset.filter(created_at__date__lte=until)
    return queryset


def rule_change_get(*, user: Any, pk: int | str) -> RuleChange:
    if not user_can_read_rules(user):
        raise Http404
    try:
        return rule_change_list().get(pk=pk)
    except (ObjectDoesNotExist, ValueError, TypeError):
        raise Http404 from None


def rule_changes_for_object(*, obj: models.Model, limit: int = 10) -> list[RuleChange]:
    """The latest changes that edit ``obj`` (its per-object timeline)."""
    return list(rule_change_list(target=obj)[:limit])
