"""What a list page may keep between requests: the fingerprint of its rows.

A list whose rows are governed rows (and what they show of other governed rows) changes only
when one of those rows does, and every write of a governed row adds a history row. The
newest history row of each model shown, one index lookup each in one query, is then a
fingerprint of the rows: a page rendered from them may be kept under a key naming it (see
``governance.views._kept``)."""

import functools
import hashlib
from typing import Any

from django.db import connection, models

from .history import newest_row_columns


@functools.cache
def _fingerprint_sql(governed: tuple[type[models.Model], ...]) -> str:
    return "SELECT " + ", ".join(newest_row_columns(governed))


def rows_fingerprint(governed: tuple[type[models.Model], ...]) -> str:
    """The newest history row of each of ``governed`` (one query), as a short string."""
    with connection.cursor() as cursor:
        cursor.execute(_fingerprint_sql(governed))
        row: tuple[Any, ...] = tuple(cursor.fetchone() or ())
    return hashlib.sha1(repr(row).encode(), usedforsecurity=False).hexdigest()[:20]
