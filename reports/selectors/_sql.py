"""SQL pieces that differ between PostgreSQL and SQLite, for the review's queries.

Everything the review computes is aggregated in the database. Percentiles are continuous
(linear interpolation between the two nearest ranks): ``percentile_cont`` on PostgreSQL, and
on SQLite the same formula written with window functions (``ROW_NUMBER`` and ``COUNT`` over
each group), so both give the same numbers: for ``n`` values sorted ascending and a fraction
``p``, with ``pos = p × (n − 1)``, ``lo = floor(pos)``: ``v[lo] + (pos − lo) × (v[lo+1] − v[lo])``
(ranks from 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection

PERCENTILES = (0.5, 0.9, 0.99)


def is_postgres() -> bool:
    return connection.vendor == "postgresql"


def param(moment: datetime) -> Any:
    """A datetime as the backend stores it (SQLite compares text)."""
    return connection.ops.adapt_datetimefield_value(moment)


def seconds_between(later: str, earlier: str) -> str:
    """SQL for ``later − earlier`` in seconds (float)."""
    if is_postgres():
        # date_part is double precision; EXTRACT is numeric (several times slower).
        return f"date_part('epoch', ({later}) - ({earlier}))"
    # julianday() is a double of days: round to the millisecond its error (~1e-5 s) away.
    return f"ROUND((julianday({later}) - julianday({earlier})) * 86400.0, 3)"


def day_of(moment: str) -> str:
    """SQL for the UTC day of a timestamp, as ``YYYY-MM-DD``."""
    if is_postgres():
        # A date (ISO text once cast, per group: far cheaper than to_char per row).
        return f"CAST(({moment}) AT TIME ZONE 'UTC' AS date)"
    return f"substr({moment}, 1, 10)"


def ts(placeholder: str) -> str:
    """A timestamp parameter (typed on PostgreSQL, so CASE branches agree)."""
    return f"CAST(%({placeholder})s AS timestamptz)" if is_postgres() else f"%({placeholder})s"


def least(a: str, b: str) -> str:
    return f"(CASE WHEN ({a}) < ({b}) THEN ({a}) ELSE ({b}) END)"


def greatest(a: str, b: str) -> str:
    return f"(CASE WHEN ({a}) > ({b}) THEN ({a}) ELSE ({b}) END)"


def percentile_sets(
    *,
    source: str,
    value: str,
    sets: Sequence[tuple[str, Sequence[str]]],
    extra: str = "",
) -> str:
    """A query over the CTE ``source`` giving, for each grouping set ``(name, keys)``, rows
    ``(set, k1, k2, n, p50, p90, p99, max, <extra...>)`` (``k1``/``k2`` NULL when unused).

    ``extra`` is a list of further aggregates over the source's columns (e.g. ``, SUM(x)``).
    Keys come back as text (the sets' keys have different types); ``key_id`` reads an id.
    """
    parts = []
    for name, keys in sets:
        k1 = f"CAST({keys[0]} AS TEXT)" if len(keys) > 0 else "NULL"
        k2 = f"CAST({keys[1]} AS TEXT)" if len(keys) > 1 else "NULL"
        group = f"GROUP BY {', '.join(keys)}" if keys else ""
        if is_postgres():
            parts.append(
                f"SELECT '{name}' AS gs, {k1} AS k1, {k2} AS k2, COUNT(*) AS n, "
                + ", ".join(
                    f"percentile_cont({p}) WITHIN GROUP (ORDER BY {value})" for p in PERCENTILES
                )
                + f", MAX({value}) {extra} FROM {source} {group}"
            )
            continue
        partition = f"PARTITION BY {', '.join(keys)}" if keys else ""
        columns = ", ".join(f"{key} AS k{i + 1}" for i, key in enumerate(keys))
        inner = (
            f"SELECT *{', ' + columns if columns else ''}, "
            f"ROW_NUMBER() OVER ({partition} ORDER BY {value}) AS rn_, "
            f"COUNT(*) OVER ({partition}) AS n_ FROM {source}"
        )
        interpolated = []
        for p in PERCENTILES:
            pos = f"({p} * (n_ - 1))"
            lo = f"CAST({pos} AS INTEGER)"
            interpolated.append(
                f"SUM(CASE WHEN rn_ = {lo} + 1 THEN ({value}) * (1.0 - ({pos} - {lo})) "
                f"WHEN rn_ = {lo} + 2 THEN ({value}) * ({pos} - {lo}) ELSE 0 END)"
            )
        out_k1 = "CAST(k1 AS TEXT)" if len(keys) > 0 else "NULL"
        out_k2 = "CAST(k2 AS TEXT)" if len(keys) > 1 else "NULL"
        parts.append(
            f"SELECT '{name}' AS gs, {out_k1} AS k1, {out_k2} AS k2, COUNT(*) AS n, "
            + ", ".join(interpolated)
            + f", MAX({value}) {extra} FROM ({inner}) AS ranked_ "
            + (f"GROUP BY {', '.join(f'k{i + 1}' for i in range(len(keys)))}" if keys else "")
        )
    return " UNION ALL ".join(parts)


def key_id(value: Any) -> int | None:
    """An id key of ``percentile_sets`` (text) as an int."""
    return None if value is None else int(value)


def fetch(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())
