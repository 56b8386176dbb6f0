"""A list API's count kept while its rows are unchanged (``HistoryCountedPagination``)."""

import hashlib
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.db.models import QuerySet

from governance.selectors import newest_row_columns
from governance.toolkit.api import LimitOffsetPagination


class HistoryCountedPagination(LimitOffsetPagination):
    """``LimitOffsetPagination`` whose count of a governed model's rows is kept in the cache
    while they are unchanged: the newest history row of the model (one index lookup; every
    write of a governed row adds one) is read on each request, and the rows are counted
    again only when it is newer. A list of many rows then costs the same as a short one.
    For a list whose rows follow its filters alone (the same for every reader)."""

    def get_count(self, queryset: Any) -> int:
        if not isinstance(queryset, QuerySet) or not hasattr(queryset.model, "history"):
            return super().get_count(queryset)
        with connection.cursor() as cursor:
            cursor.execute("SELECT " + newest_row_columns([queryset.model])[0])
            newest = cursor.fetchone()[0]
        # The list's filters as asked (the same filters give the same rows: a list whose
        # rows differ by reader must not use this class), not the page's limit and offset.
        request = getattr(self, "request", None)
        if request is None:
            return super().get_count(queryset)
        asked = sorted(
            (name, request.query_params.getlist(name))
            for name in request.query_params
            if name not in (self.limit_query_param, self.offset_query_param)
        )
        digest = hashlib.sha1(repr(asked).encode(), usedforsecurity=False).hexdigest()
        key = f"arbiter:count:{queryset.model._meta.db_table}:{newest}:{digest}"
        count = cache.get(key)
        if count is None:
            count = super().get_count(queryset)
            cache.set(key, count, 3600)
        return int(count)
