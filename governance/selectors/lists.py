"""What every list selector shares: the sort orders a list offers and the text search.

A list selector takes its filters and its sort as keyword arguments; the page (through its
filter form) and the API (through its filter serializer) call it with the same parameters, so
both show the same rows in the same order. ``sort`` names one of the list's ``SORTS``; an
empty one is the list's first (default) order.
"""

from typing import TypeVar

from django.db import models
from django.db.models import Q, QuerySet
from django.utils.functional import Promise

M = TypeVar("M", bound=models.Model)

# A list's sort orders: the name a client passes → (its label, the order_by fields).
Sorts = dict[str, tuple[str | Promise, tuple[str, ...]]]


def sort_choices(sorts: Sorts) -> list[tuple[str, str | Promise]]:
    """The sort orders as (value, label) choices for a form or a serializer."""
    return [(name, label) for name, (label, _fields) in sorts.items()]


def sorted_by(queryset: QuerySet[M], *, sort: str | None, sorts: Sorts) -> QuerySet[M]:
    """``queryset`` in the order ``sort`` names (the first of ``sorts`` when empty).

    An unknown name is a programming error (the form and the serializer offer only these),
    so it raises ``ValueError`` rather than falling back silently.
    """
    if not sort:
        sort = next(iter(sorts))
    if sort not in sorts:
        raise ValueError(f"unknown sort {sort!r}")
    return queryset.order_by(*sorts[sort][1])


def search_filter(queryset: QuerySet[M], *, query: str | None, fields: list[str]) -> QuerySet[M]:
    """Rows with ``query`` in any of ``fields`` (case-insensitive); all rows when empty."""
    if not query:
        return queryset
    condition = Q()
    for field in fields:
        condition |= Q(**{f"{field}__icontains": query})
    return queryset.filter(condition)
