"""The timeline of rule changes: listing, filtering and fetching them."""

import datetime as dt
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ObjectDoesNotExist
from django.db import models
from django.db.models import Prefetch, QuerySet
from django.http import Http404

from governance.models import RuleChange, RuleEdit, User

from ..rules import user_can_read_rules


def rule_change_list() -> QuerySet[RuleChange]:
    """Every change, newest first, with its people and edits (a fixed number of queries)."""
    return (
        RuleChange.objects.select_related(
            "author", "proposed_by", "approved_by", "applied_by", "closed_by", "rollback_of"
        )
        .prefetch_related(
            Prefetch(
                "edits", queryset=RuleEdit.objects.select_related("content_type").order_by("pk")
            )
        )
        .order_by("-created_at", "-pk")
    )


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
    if kind:
        queryset = queryset.filter(edits__kind=kind)
    if target is not None:
        queryset = queryset.filter(
            edits__content_type=ContentType.objects.get_for_model(type(target)),
            edits__object_id=target.pk,
        )
    if author is not None:
        queryset = queryset.filter(author=author)
    if since is not None:
        queryset = queryset.filter(created_at__date__gte=since)
    if until is not None:
        queryset = queryset.filter(created_at__date__lte=until)
    if kind or target is not None:
        queryset = queryset.distinct()
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
    return list(rule_change_filter(rule_change_list(), target=obj)[:limit])
