"""What every list selector shares: the sort orders a list offers and the text search.

A list selector takes its filters and its sort as keyword arguments; the page (through its
filter form) and the API (through its filter serializer) call it with the same parameters, so
both show the same rows in the same order. ``sort`` names one of the list's ``SORTS``; an
empty one is the list's first (default) order.
"""

from typing import Any, TypeVar

from django.db import models
from django.db.models import CharField, Q, QuerySet, Subquery
from django.db.models.query import ModelIterable
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


class KeysFirstQuerySet(QuerySet[M]):
    """A queryset whose pages pick their rows' keys first, in a subquery, then read the rows.

    For a list sorted on a column of a joined table (quotas by guarantee, then by project
    name) the database sorts every matching row before it can return a page; with the
    related rows of ``select_related`` in each, that sort is wide. A slice of this queryset
    is ``pk IN (the keys of the slice, sorted narrow) `` in the same order: one query still,
    the same rows in the same order, and only the page's rows joined and read in full.
    """

    def __getitem__(self, k: Any) -> Any:
        if (
            not isinstance(k, slice)
            or k.step is not None
            or self._result_cache is not None
            or self._iterable_class is not ModelIterable
            or self.query.is_sliced
        ):
            return super().__getitem__(k)
        keys = self.values("pk")[k]
        return self.filter(pk__in=keys)


# Between the names of ``JoinedNames``: usernames hold no space, so the string splits back.
NAMES_SEPARATOR = ", "


class JoinedNames(Subquery):
    """A row's related names in one column, sorted, joined by ``NAMES_SEPARATOR`` (``None``
    when there is none): ``queryset``, correlated to the outer row by ``OuterRef``, gives
    them as its columns ``name`` and ``sort_key``, ordered by ``sort_key``.

    A list reads them in its own query rather than by a prefetch (one query fewer, and no
    row objects built). PostgreSQL sorts them in ``string_agg``; SQLite's ``group_concat``
    (before 3.44, no ``ORDER BY`` of its own) takes them in the order of its subquery.
    """

    output_field = CharField()
    template = (
        "(SELECT STRING_AGG(names.name, '%(separator)s' ORDER BY names.sort_key)"
        " FROM (%(subquery)s) names)"
    )

    def __init__(self, queryset: QuerySet[Any]) -> None:
        super().__init__(queryset, separator=NAMES_SEPARATOR)

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler,
            connection,
            template="(SELECT GROUP_CONCAT(names.name, '%(separator)s') FROM (%(subquery)s) names)",
            **extra,
        )


def split_names(joined: str | None) -> list[str]:
    """The names of a ``JoinedNames`` column (names that never hold the separator, such as
    usernames)."""
    return joined.split(NAMES_SEPARATOR) if joined else []
