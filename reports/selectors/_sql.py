"""SQL pieces that differ between PostgreSQL and SQLite, for the review's queries.

Everything the review computes is aggregated in the database. Percentiles are continuous
(linear interpolation between the two nearest ranks): ``percentile_cont`` on PostgreSQL, and
on SQLite the same formula written with window functions (``ROW_NUMBER`` and ``COUNT`` over
each group), so both give the same numbers: for ``n`` values sorted ascending and a fraction
``p``, with ``pos = p × (n − 1)``, ``lo = floor(pos)``: ``v[lo] + (pos − lo) × (v[lo+1] − v[lo])``
(ranks from 0).

``snapshot_export`` and ``run_all`` run the review's queries on several connections at once,
all reading one snapshot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection, transaction
from django.utils import translation

T = TypeVar("T")
_SNAPSHOT_ID = re.compile(r"[0-9A-F]+-[0-9A-F]+(-[0-9]+)?")

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


def _grouping_mask(keys: Sequence[str], all_keys: Sequence[str]) -> int:
    """``GROUPING(all_keys...)`` of the set grouped by ``keys`` (a bit set per key left out)."""
    width = len(all_keys)
    return sum(1 << (width - 1 - i) for i, key in enumerate(all_keys) if key not in keys)


def _interpolated(p: float, arr: str, n: str) -> str:
    """``percentile_cont(p)`` of the ascending array ``arr`` of ``n`` values, as PostgreSQL
    computes it (float8 position, then ``lo + proportion × (hi − lo)``)."""
    pos = f"(CAST({p} AS DOUBLE PRECISION) * ({n} - 1))"
    lo = f"CAST(floor({pos}) AS INTEGER)"
    return (
        f"CASE WHEN {n} = 0 THEN NULL WHEN {lo} + 1 >= {n} THEN {arr}[{lo} + 1] "
        f"ELSE {arr}[{lo} + 1] + (({pos} - {lo}) * ({arr}[{lo} + 2] - {arr}[{lo} + 1])) END"
    )


def _percentile_sets_postgres(
    *,
    source: str,
    value: str,
    sets: Sequence[tuple[str, Sequence[str]]],
    extra: Sequence[str],
    ordered: bool,
    percentiles: Sequence[float] = PERCENTILES,
    subset: str | None = None,
) -> str:
    all_keys: list[str] = []
    for _name, keys in sets:
        all_keys += [key for key in keys if key not in all_keys]
    if len({frozenset(keys) for _name, keys in sets}) < len(sets):
        raise ValueError("Two grouping sets group by the same keys.")
    if all_keys:
        gs = "CASE GROUPING(" + ", ".join(all_keys) + ")"
        for name, keys in sets:
            gs += f" WHEN {_grouping_mask(keys, all_keys)} THEN '{name}'"
        gs += " END"
    else:
        gs = f"'{sets[0][0]}'"
    grouping = ", ".join("(" + ", ".join(keys) + ")" for _name, keys in sets)
    # Every key as text; each set's own keys are picked as k1..k3 in the outer query.
    columns = [f"{gs} AS gs_", *(f"CAST({key} AS TEXT) AS {key}" for key in all_keys)]
    columns += [f"{expression} AS x{i}_" for i, expression in enumerate(extra)]
    picks = []
    for slot in range(3):
        cases = [f"WHEN '{name}' THEN {keys[slot]}" for name, keys in sets if len(keys) > slot]
        picks.append(f"CASE gs_ {' '.join(cases)} END" if cases else "NULL")
    keys_out = f"{picks[0]} AS k1_, {picks[1]} AS k2_, {picks[2]} AS k3_"
    extras = "".join(f", x{i}_" for i in range(len(extra)))
    if not ordered:
        only = f" FILTER (WHERE {subset} = 1)"
        columns += [
            "COUNT(*) AS n_",
            *(
                f"percentile_cont({p}) WITHIN GROUP (ORDER BY {value}) AS p{i}_"
                for i, p in enumerate(percentiles)
            ),
            f"MAX({value}) AS max_",
        ]
        if subset is not None:
            columns += [
                f"COUNT(*){only} AS sn_",
                *(
                    f"percentile_cont({p}) WITHIN GROUP (ORDER BY {value}){only} AS sp{i}_"
                    for i, p in enumerate(percentiles)
                ),
                f"MAX({value}){only} AS smax_",
            ]
            extras += ", sn_, " + "".join(f"sp{i}_, " for i in range(len(percentiles))) + "smax_"
        ranks = ", ".join(f"p{i}_" for i in range(len(percentiles)))
        return (
            f"SELECT gs_, {keys_out}, n_, {ranks}, max_{extras} FROM "
            f"(SELECT {', '.join(columns)} FROM {source} "
            f"GROUP BY GROUPING SETS ({grouping})) AS grouped_"
        )
    # Each group's values in ascending order; the count and the maximum come with the array
    # (its length, its last value).
    columns.append(f"array_agg({value}) AS arr_")
    counts = "COALESCE(cardinality(arr_), 0) AS n_"
    if subset is not None:
        # The subset's values in the same pass, in the same order (a second array per group).
        columns.append(f"array_agg({value}) FILTER (WHERE {subset} = 1) AS sarr_")
        counts += ", COALESCE(cardinality(sarr_), 0) AS sn_"
        extras += (
            ", sn_, "
            + "".join(f"{_interpolated(p, 'sarr_', 'sn_')}, " for p in percentiles)
            + "CASE WHEN sn_ > 0 THEN sarr_[sn_] END"
        )
    ranks = ", ".join(_interpolated(p, "arr_", "n_") for p in percentiles)
    return (
        f"SELECT gs_, {keys_out}, n_, {ranks}, CASE WHEN n_ > 0 THEN arr_[n_] END"
        f"{extras} FROM (SELECT grouped_.*, {counts} FROM "
        f"(SELECT {', '.join(columns)} FROM (SELECT * FROM {source} ORDER BY {value}) "
        f"AS sorted_ GROUP BY GROUPING SETS ({grouping})) AS grouped_) AS counted_"
    )


def percentile_sets(
    *,
    source: str,
    value: str,
    sets: Sequence[tuple[str, Sequence[str]]],
    extra: Sequence[str] = (),
    ordered: bool = False,
    percentiles: Sequence[float] = PERCENTILES,
    subset: str | None = None,
) -> str:
    """One query over ``source`` (a subquery or CTE name) giving, for each grouping set
    ``(name, keys)`` (at most three keys; no two sets of the same keys), rows ``(set, k1,
    k2, k3, n, p50, p90, p99, max, <extra...>)`` (unused keys NULL; with ``percentiles``,
    those percentiles in their order in place of p50, p90, p99).

    ``extra`` are further aggregates over the source's columns (e.g. ``SUM(x)``). Keys come
    back as text (the sets' keys have different types); ``key_id`` reads an id.

    ``subset``: a column of the source holding 1 for the rows of a subset (else 0); each row
    then ends, after the extras, with the subset's own count, percentiles and maximum (the
    same formula over the subset's values alone; NULL percentiles for an empty subset).

    On PostgreSQL every set comes from one scan, with ``GROUPING SETS``: ``ordered=False``
    uses ``percentile_cont`` (one sort per set and group); ``ordered=True`` sorts the source
    once by ``value`` and collects each group's values with ``array_agg`` in that order, so
    the percentiles are read from each group's array at their ranks. That is only right when
    the aggregation reads its input in the sorted order (every set hashed, no other sort):
    ``hashed_in_order`` checks the plan before it runs. SQLite computes the same formula with
    window functions, one query per set.
    """
    if is_postgres():
        return _percentile_sets_postgres(
            source=source,
            value=value,
            sets=sets,
            extra=extra,
            ordered=ordered,
            percentiles=percentiles,
            subset=subset,
        )
    return _percentile_sets_sqlite(
        source=source, value=value, sets=sets, extra=extra, percentiles=percentiles, subset=subset
    )


def _interpolated_sqlite(p: float, value: str, n: str, rank: str, where: str = "") -> str:
    pos = f"({p} * ({n} - 1))"
    lo = f"CAST({pos} AS INTEGER)"
    return (
        f"SUM(CASE WHEN {where}{rank} = {lo} + 1 THEN ({value}) * (1.0 - ({pos} - {lo})) "
        f"WHEN {where}{rank} = {lo} + 2 THEN ({value}) * ({pos} - {lo}) ELSE 0 END)"
    )


def _percentile_sets_sqlite(
    *,
    source: str,
    value: str,
    sets: Sequence[tuple[str, Sequence[str]]],
    extra: Sequence[str],
    percentiles: Sequence[float],
    subset: str | None,
) -> str:
    parts = []
    extras = "".join(f", {expression}" for expression in extra)
    for name, keys in sets:
        partition = f"PARTITION BY {', '.join(keys)}" if keys else ""
        columns = ", ".join(f"{key} AS k{i + 1}_" for i, key in enumerate(keys))
        ranked = ""
        subset_out = ""
        if subset is not None:
            # The subset's own ranks and count (its rows ranked apart from the others).
            by_subset = f"PARTITION BY {', '.join([*keys, subset])}"
            ranked = (
                f", ROW_NUMBER() OVER ({by_subset} ORDER BY {value}) AS srn_, "
                f"SUM({subset}) OVER ({partition}) AS sn_"
            )
            where = f"{subset} = 1 AND "
            subset_out = (
                f", SUM({subset}), "
                + "".join(
                    f"CASE WHEN SUM({subset}) > 0 THEN "
                    f"{_interpolated_sqlite(p, value, 'sn_', 'srn_', where)} END, "
                    for p in percentiles
                )
                + f"MAX(CASE WHEN {subset} = 1 THEN {value} END)"
            )
        inner = (
            f"SELECT *{', ' + columns if columns else ''}, "
            f"ROW_NUMBER() OVER ({partition} ORDER BY {value}) AS rn_, "
            f"COUNT(*) OVER ({partition}) AS n_{ranked} FROM {source}"
        )
        interpolated = [_interpolated_sqlite(p, value, "n_", "rn_") for p in percentiles]
        outs = [f"CAST(k{i + 1}_ AS TEXT)" if len(keys) > i else "NULL" for i in range(3)]
        parts.append(
            f"SELECT '{name}' AS gs_, {', '.join(outs)}, COUNT(*) AS n_, "
            + ", ".join(interpolated)
            + f", MAX({value}){extras}{subset_out} FROM ({inner}) AS ranked_ "
            + (f"GROUP BY {', '.join(f'k{i + 1}_' for i in range(len(keys)))}" if keys else "")
        )
    return " UNION ALL ".join(parts)


def hashed_in_order(sql: str, params: dict[str, Any]) -> bool:
    """Whether PostgreSQL's plan of an ``ordered=True`` ``percentile_sets`` query reads the
    sorted source in order in every set (``plan_reads_in_order``)."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return plan_reads_in_order(plan[0]["Plan"])


def plan_reads_in_order(plan: dict[str, Any]) -> bool:
    """Whether a plan (``EXPLAIN (FORMAT JSON)``'s ``Plan``) aggregates its sorted source in
    order: one sort in the whole plan (the source's; parallel workers may sort their parts,
    merged in order by a Gather Merge, or hand over the rows that sort then orders), every
    grouping set hashed (or the empty set, read as it comes), no Gather above the sort, no
    partial aggregation."""
    sorts = 0
    safe = True

    def walk(node: dict[str, Any], sorted_above: bool = False) -> None:
        nonlocal sorts, safe
        kind = node.get("Node Type", "")
        if kind in ("Sort", "Incremental Sort"):
            sorts += 1
            sorted_above = True
        if kind == "Gather" and not sorted_above:
            safe = False  # rows from several processes, in no order
        if node.get("Partial Mode", "Simple") != "Simple":
            safe = False  # groups merged from parts
        if kind == "Aggregate" and "Grouping Sets" in node:
            if node.get("Strategy") not in ("Hashed", "Mixed"):
                safe = False
            for grouping_set in node["Grouping Sets"]:
                if "Sort Key" in grouping_set:
                    safe = False
                for keys in grouping_set.get("Group Keys", []):
                    if keys:
                        safe = False
        for child in node.get("Plans", []):
            walk(child, sorted_above)

    walk(plan)
    return safe and sorts == 1


def key_id(value: Any) -> int | None:
    """An id key of ``percentile_sets`` (text) as an int."""
    return None if value is None else int(value)


def fetch(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def snapshot_export(*, outermost: bool) -> str | None:
    """At the start of the outermost transaction, on PostgreSQL and when the review may use
    more than one connection: make the transaction ``REPEATABLE READ`` (one snapshot for all
    its queries) and export that snapshot for ``run_all``'s connections. Otherwise ``None``:
    inside an outer transaction, other connections could not see its own writes."""
    if not (is_postgres() and outermost and settings.ARBITER_REVIEW_CONNECTIONS > 1):
        return None
    with connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cursor.execute("SELECT pg_export_snapshot()")
        return str(cursor.fetchone()[0])


def run_all(
    tasks: Sequence[Callable[[], T]], *, snapshot: str | None, prepare: Callable[[], None]
) -> list[T]:
    """The results of ``tasks`` (read-only queries), in order.

    With a ``snapshot`` (``snapshot_export``), on ``ARBITER_REVIEW_CONNECTIONS`` connections
    at once, each task in its own read-only transaction that imports the snapshot, so every
    task reads exactly what the exporting transaction reads (the one that must stay open
    until they finish); ``prepare`` runs first in each (its ``SET LOCAL`` settings). Tasks
    are taken in the order given: the longest first balances them. Without a snapshot, one
    after another in the current transaction."""
    if snapshot is None or len(tasks) < 2:
        return [task() for task in tasks]
    if not _SNAPSHOT_ID.fullmatch(snapshot):
        raise ValueError(f"Unexpected snapshot id {snapshot!r}.")

    language = translation.get_language()  # the threads speak the caller's language

    def run(task: Callable[[], T]) -> T:
        try:
            with translation.override(language), transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    # A utility statement takes no parameters: the id is checked above.
                    cursor.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
                prepare()
                return task()
        finally:
            connection.close()  # this thread's own connection

    workers = min(settings.ARBITER_REVIEW_CONNECTIONS, len(tasks))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="review") as pool:
        return list(pool.map(run, tasks))
