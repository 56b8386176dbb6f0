"""A replay's rows as the monthly review's tables (``reports.selectors.change_replay``).

``replay_tables`` names, in the review's ``tables()``, the rows one side of a run stored
(``queues.models.ReplayWait``, ``ReplayHour``, ``ReplayPreemption``) in place of the
evidence's; ``given_rules`` turns the capacity and quotas the side ran under (stored in the
run's result) into what the review's service query measures against, and ``quota_table``
names those quotas as the review's ``Quota`` table.
"""

from __future__ import annotations

import math
from typing import Any

from queues.models import (
    ChangeReplay,
    ReplayHour,
    ReplayPreemption,
    ReplaySide,
    ReplayWait,
    WorkloadEvent,
)
from queues.replay.keys import MODELS, ReplayIds, RulesRan

from .review._common import Names, Scope, tables
from .review.service import GivenRules

HOUR = 3600.0


def _sql_number(value: Any, kind: str) -> str:
    """A number written into the SQL (only numbers are), typed even when it is NULL."""
    if value is None:
        return f"CAST(NULL AS {kind})"
    return f"CAST({int(value) if kind == 'INTEGER' else float(value)!r} AS {kind})"


def quota_table(quotas: list[dict[str, Any]]) -> str:
    """``Quota``'s columns the review reads, holding ``quotas``, as a subquery."""
    columns = (
        ("project_id", "INTEGER"),
        ("pool_id", "INTEGER"),
        ("flavor_id", "INTEGER"),
        ("guarantee", "DOUBLE PRECISION"),
        ("lending_limit", "DOUBLE PRECISION"),
        ("preemption_class_id", "INTEGER"),
    )
    selects = [
        "SELECT "
        + ", ".join(f"{_sql_number(row.get(name), kind)} AS {name}" for name, kind in columns)
        for row in quotas
    ]
    if not selects:
        nothing = ", ".join(f"{_sql_number(None, kind)} AS {name}" for name, kind in columns)
        selects = [f"SELECT {nothing} WHERE 1 = 0"]
    return f"({' UNION ALL '.join(selects)}) AS replayed_quotas_"


def _ids(names: Names) -> ReplayIds:
    """The replay's keys' ids, from the rules the review read (``Names`` has the same fields)."""
    return ReplayIds.of(**{name: getattr(names, name).values() for name in MODELS})


def given_rules(rules: dict[str, Any], scope: Scope, names: Names) -> GivenRules:
    """The capacity and quotas one side of a run ran under (``queues.services.replay.
    RulesRan``), as the review's service query takes them: the capacities of the last
    period (as the review reads today's), the GPU-seconds of capacity in each hour of the
    scope (time-weighted across the periods) and the quotas, by id."""
    ids = _ids(names)
    ran = RulesRan.from_json(rules)
    periods = list(ran.capacity)
    bounds = [-math.inf, *(at for at, _c in periods[1:]), math.inf]
    hourly: dict[tuple[int, int], list[float]] = {}
    for key in sorted({key for _at, capacity in periods for key in capacity}):
        pool_id, flavor_id = ids.flavor(key)
        if pool_id is None or flavor_id is None:
            continue
        seconds = []
        for hour in scope.hours:
            h0 = hour.timestamp()
            total = 0.0
            for n, (_at, capacity) in enumerate(periods):
                overlap = min(bounds[n + 1], h0 + HOUR) - max(bounds[n], h0)
                if overlap > 0:
                    total += float(capacity.get(key, 0.0)) * overlap
            seconds.append(total)
        hourly[(pool_id, flavor_id)] = seconds
    capacities = [
        {"pool_id": pool_id, "flavor_id": flavor_id, "gpus": gpus}
        for key, gpus in (periods[-1][1].items() if periods else ())
        for pool_id, flavor_id in [ids.flavor(key)]
        if gpus and pool_id is not None and flavor_id is not None
    ]
    quotas = []
    for quota in ran.quotas:
        pool_id, flavor_id = ids.flavor(quota.flavor)
        project_id = ids.project(quota.project)
        if None in (pool_id, flavor_id, project_id):
            continue
        quotas.append(
            {
                "project_id": project_id,
                "pool_id": pool_id,
                "flavor_id": flavor_id,
                "guarantee": quota.guarantee,
                "lending_limit": quota.lending_limit,
                "preemption_class_id": ids.preemption_class(quota.preemption_class),
            }
        )
    return capacities, hourly, quotas


def replay_tables(*, run: ChangeReplay, side: str) -> dict[str, str]:
    """The review's tables (``tables()``) with the run's rows of ``side`` in place of the
    evidence's waits, hours and preemptions (and no other events: a replay has no failures
    or requeues)."""
    if side not in ReplaySide.values:
        raise ValueError(f"Unknown side {side!r}.")
    # Only ints and a checked choice are written into the SQL.
    where = f"WHERE replay_id = {int(run.pk)} AND side = '{side}'"
    t = tables()
    # A replay observes to its window's end: no wait is cut short by its source (censored).
    t["wait"] = (
        "(SELECT submitted_at, day, project_id, tier_id, flavor_id, pool_id, category, "
        f"wait_end, started, FALSE AS censored FROM {ReplayWait._meta.db_table} {where}) "
        "AS replayed_"
    )
    t["hour"] = (
        "(SELECT hour, pool_id, flavor_id, project_id, tier_id, gpu_seconds, "
        f"quota_wait_seconds, resource_wait_seconds FROM {ReplayHour._meta.db_table} {where}) "
        "AS replayed_hours_"
    )
    t["preempted"] = (
        "(SELECT time, gpus, project_id, tier_id, preemption_class_id AS class_id, pool_id, "
        f"run_from, restart FROM {ReplayPreemption._meta.db_table} {where}) "
        "AS replayed_preemptions_"
    )
    t["event"] = f"(SELECT * FROM {WorkloadEvent._meta.db_table} WHERE 1 = 0)"
    return t
