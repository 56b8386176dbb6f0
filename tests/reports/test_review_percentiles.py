"""The review's percentiles: continuous interpolation (``percentile_cont``), the same
whichever way the database computes them (on PostgreSQL from one sort of the values read in
order by every grouping set, or ``percentile_cont`` per group; on SQLite window functions)."""

import math
import random
from collections import defaultdict

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from queues.models import WorkloadWait
from reports.selectors import _sql, review_metrics_by_project
from reports.selectors.review import _settings as review_settings
from tests.reports.test_review_metrics import W0, W1, history  # noqa: F401 (a fixture)

SETS = (("all", ()), ("g", ("g",)), ("h", ("h",)), ("hg", ("h", "g")))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@pytest.fixture
def values(db) -> list[tuple[int, int, float]]:
    """Values in groups of every size from 1 up (a single value, two, many), with ties."""
    chance = random.Random(7)
    rows = [(g, h, round(chance.expovariate(1 / 3600), 3)) for g in range(6) for h in range(3)
            for _ in range(g * g + h)]  # fmt: skip
    rows += [(9, 0, 5.0)] * 4
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY TABLE review_values (g integer, h integer, v float)")
        cursor.executemany("INSERT INTO review_values VALUES (%s, %s, %s)", rows)
    return rows


def computed(ordered: bool) -> dict[tuple, tuple]:
    sql = _sql.percentile_sets(
        source="review_values", value="v", sets=SETS, extra=("SUM(g)",), ordered=ordered
    )
    if ordered:
        assert _sql.hashed_in_order(sql, {})
    out = {}
    for row in _sql.fetch(sql, {}):
        out[(row[0], row[1], row[2], row[3])] = tuple(
            None if value is None else round(float(value), 6) for value in row[4:]
        )
    return out


def expected(rows: list[tuple[int, int, float]]) -> dict[tuple, tuple]:
    out = {}
    for name, keys in SETS:
        groups: dict[tuple, list[tuple[int, int, float]]] = defaultdict(list)
        for row in rows:
            groups[tuple(row[0] if key == "g" else row[1] for key in keys)].append(row)
        for key, members in groups.items():
            waits = [row[2] for row in members]
            padded = [str(part) for part in key] + [None] * (3 - len(key))
            out[(name, *padded)] = (
                len(waits),
                *(round(percentile(waits, p), 6) for p in _sql.PERCENTILES),
                max(waits),
                sum(row[0] for row in members),
            )
    return out


def test_percentiles_are_continuous_in_every_set(values):
    got, want = computed(ordered=False), expected(values)
    assert set(got) == set(want)
    for key, figures in want.items():
        assert got[key] == pytest.approx(figures, abs=1e-6), key
    if _sql.is_postgres():
        assert computed(ordered=True) == computed(ordered=False)


def _aggregate(source: dict, strategy: str = "Mixed", **extra) -> dict:
    sets = [{"Hash Keys": [["g"]]}, {"Group Keys": [[]]}]
    return {"Node Type": "Aggregate", "Strategy": strategy, "Grouping Sets": sets,
            "Plans": [source], **extra}  # fmt: skip


SCAN = {"Node Type": "Seq Scan"}


def _sort(*children: dict) -> dict:
    return {"Node Type": "Sort", "Plans": list(children)}


@pytest.mark.parametrize(
    "plan, in_order",
    [
        (_aggregate(_sort(SCAN)), True),
        # Parallel workers read the rows, the leader sorts them: in order.
        (_aggregate(_sort({"Node Type": "Gather", "Plans": [SCAN]})), True),
        # Workers sort their parts, merged in order.
        (_aggregate({"Node Type": "Gather Merge", "Plans": [_sort(SCAN)]}), True),
        # Sorted parts gathered as they come: out of order.
        (_aggregate({"Node Type": "Gather", "Plans": [_sort(SCAN)]}), False),
        (_aggregate(SCAN), False),  # no sort at all
        (_aggregate(_sort(_sort(SCAN))), False),  # a second sort reorders
        (_aggregate(_sort(SCAN), strategy="Sorted"), False),
        (_aggregate(_sort(SCAN), **{"Partial Mode": "Finalize"}), False),
        (
            {
                "Node Type": "Aggregate",
                "Strategy": "Mixed",
                "Grouping Sets": [{"Group Keys": [["h"]], "Sort Key": ["h"]}],
                "Plans": [_sort(SCAN)],
            },
            False,
        ),
    ],
)
def test_the_plan_check_accepts_only_plans_that_read_the_sorted_values_in_order(plan, in_order):
    assert _sql.plan_reads_in_order(plan) is in_order


def test_a_subsets_percentiles_come_from_the_same_pass(values):
    """``subset``: each row ends with the subset's own count, percentiles and maximum (the
    started jobs' figures of the review), the same on every backend and either way."""
    with connection.cursor() as cursor:  # a table, as the review's source is
        cursor.execute(
            "CREATE TEMPORARY TABLE review_subset AS "
            "SELECT g, h, v, CASE WHEN h = 1 THEN 0 ELSE 1 END AS s_ FROM review_values"
        )
    source = "review_subset"
    fractions = (0.5, 0.9, 0.95, 0.99)

    def got(ordered: bool) -> dict[tuple, tuple]:
        sql = _sql.percentile_sets(source=source, value="v", sets=SETS, extra=("SUM(g)",),
                                   ordered=ordered, percentiles=fractions, subset="s_")  # fmt: skip
        if ordered:
            review_settings()  # the review's memory for its hashed groups (two arrays each)
            assert _sql.hashed_in_order(sql, {})
        return {
            tuple(row[:4]): tuple(None if x is None else round(float(x), 6) for x in row[-6:])
            for row in _sql.fetch(sql, {})
        }

    want: dict[tuple, tuple] = {}
    for name, keys in SETS:
        groups: dict[tuple, list[float]] = defaultdict(list)
        for g, h, v in values:
            members = groups[tuple(g if key == "g" else h for key in keys)]
            if h != 1:
                members.append(v)
        for g, h, _v in values:  # every group, those with no value of the subset too
            groups.setdefault(tuple(g if key == "g" else h for key in keys), [])
        for key, subset in groups.items():
            padded = (name, *(str(part) for part in key), *([None] * (3 - len(key))))
            want[padded] = (
                len(subset),
                *(round(percentile(subset, p), 6) if subset else None for p in fractions),
                max(subset) if subset else None,
            )
    unordered = got(ordered=False)
    assert set(unordered) == set(want)
    for key, figures in want.items():
        assert unordered[key] == pytest.approx(figures, abs=1e-6), key
    if _sql.is_postgres():
        assert got(ordered=True) == unordered


def test_one_connection_reads_the_window_of_waits_once(history):  # noqa: F811
    """On one connection (here: inside the test's transaction), every grouping set's
    percentiles (the project views' too) from one query of the window's waits (on PostgreSQL
    one sort of them, when the plan hashes every set: not for a handful of rows)."""
    with CaptureQueriesContext(connection) as queries:
        metrics, views = review_metrics_by_project(start=W0, end=W1)
    # The waits' queries (the exceptions' outcomes read the waits table too).
    reads = [
        query["sql"]
        for query in queries
        if query["sql"].startswith("WITH w AS")
        and f"FROM {WorkloadWait._meta.db_table} " in query["sql"]
    ]
    assert len(reads) == 1
    assert metrics["waits"]["overall"]["jobs"] == 8 and set(views) == {"vision", "speech"}
