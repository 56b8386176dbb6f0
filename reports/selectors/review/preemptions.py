"""Preemptions, failures and requeues in the window (events; the partial index
``event_review_time`` keeps their scan small), per tier × preemption class, and per project.

Each tier × class row also carries the class's kind (a forbidden class must never be
preempted) and ``early``: the preemptions that came before the class's minimum runtime
(``min_runtime_minutes``, counted from the run's last start or resume).

A replay's preemptions are read by the same query: ``t["preempted"]`` names its rows
(``queues.models.ReplayPreemption``) in place of the events' (``reports.selectors.
change_replay``)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from queues.models import EventKind, JobState

from .. import _sql
from .._sql import fetch, key_id, percentile_sets, seconds_between, ts
from ._common import Names, Scope, gh, job_pool, job_pool_ctes, r3

FAILED_STATES = (JobState.FAILED, JobState.TIMEOUT, JobState.OUT_OF_MEMORY, JobState.NODE_FAIL)
RESTART_SETS = (
    ("all", ()),
    ("tc", ("tier_id", "class_id")),
    ("p_all", ("project_id",)),
    ("p_tc", ("project_id", "tier_id", "class_id")),
)


def _query(scope: Scope, t: dict[str, str], names: Names) -> list[tuple[Any, ...]]:
    # The classes' minimum runtimes, written into the query (a handful of classes).
    minimums = [
        f"WHEN {int(class_id)} THEN {int(item.min_runtime_minutes)}"
        for class_id, item in names.classes.items()
        if class_id is not None and item.min_runtime_minutes
    ]
    minimum = f"CASE class_id {' '.join(minimums)} END" if minimums else "NULL"
    filters = ""
    if scope.project_id is not None:
        filters += " AND j.project_id = %(project)s"
    pool_filter = " WHERE pool_id = %(pool)s" if scope.pool_id is not None else ""
    runs = f"('{EventKind.STARTED.value}', '{EventKind.RESUMED.value}')"
    # The preemptions are few: computed once (the counts and the medians read them).
    materialized = "MATERIALIZED " if _sql.is_postgres() else ""
    failed = ", ".join(f"'{state.value}'" for state in FAILED_STATES)
    pool_of_job = f" AND {job_pool(t)} = %(pool)s" if scope.pool_id is not None else ""
    # The preemptions (``pe``): from the events, or the rows ``t["preempted"]`` names (a
    # replay's, in the columns ``pe`` derives: ``reports.selectors.change_replay``).
    preempted = (
        f"pe AS (SELECT time, gpus, project_id, tier_id, class_id, pool_id, run_from, restart "
        f"FROM {t['preempted']} WHERE time >= {ts('start')} AND time < {ts('end')}"
        f"{filters.replace('j.', '')}), "
        if "preempted" in t
        else f"pe AS (SELECT e.time, j.gpus, j.project_id, j.tier_id, qp.class_id, "
        f"{job_pool(t)} AS pool_id, "
        f"(SELECT MAX(s.time) FROM {t['event']} s WHERE s.job_id = e.job_id "
        f"AND s.kind IN {runs} AND s.time <= e.time) AS run_from, "
        f"(SELECT MIN(s.time) FROM {t['event']} s WHERE s.job_id = e.job_id "
        f"AND s.kind IN {runs} AND s.time > e.time) AS restart "
        f"FROM {t['event']} e JOIN {t['job']} j ON j.id = e.job_id "
        f"LEFT JOIN qp ON qp.project_id = j.project_id AND qp.flavor_id = j.flavor_id "
        f"WHERE e.kind = '{EventKind.PREEMPTED.value}' AND e.time >= {ts('start')} "
        f"AND e.time < {ts('end')}{filters}), "
    )
    ctes = (
        f"WITH {job_pool_ctes(t)}, "
        f"{preempted}"
        f"p AS {materialized}(SELECT project_id, tier_id, class_id, "
        f"COALESCE(gpus * {seconds_between('time', 'run_from')}, 0) AS lost, "
        f"{seconds_between('restart', 'time')} AS restart_s, "
        f"CASE WHEN run_from IS NOT NULL AND {seconds_between('time', 'run_from')} < "
        f"{minimum} * 60 THEN 1 ELSE 0 END AS early FROM pe{pool_filter}), "
        f"pr AS (SELECT * FROM p WHERE restart_s IS NOT NULL) "
    )
    # One statement: the counts and GPU-hours lost per project, tier and class; the medians
    # of the time to restart; the failures and requeues per project.
    return fetch(
        ctes + "SELECT 'count', CAST(project_id AS TEXT), CAST(tier_id AS TEXT), "
        "CAST(class_id AS TEXT), COUNT(*), SUM(lost), SUM(early), NULL, NULL FROM p "
        "GROUP BY project_id, tier_id, class_id UNION ALL "
        + percentile_sets(source="pr", value="restart_s", sets=RESTART_SETS)
        + " UNION ALL SELECT 'fail', CAST(j.project_id AS TEXT), NULL, NULL, "
        f"SUM(CASE WHEN e.kind = '{EventKind.ENDED.value}' AND e.state IN ({failed}) "
        f"THEN 1 ELSE 0 END), SUM(CASE WHEN e.kind = '{EventKind.REQUEUED.value}' THEN 1 "
        f"ELSE 0 END), NULL, NULL, NULL FROM {t['event']} e "
        f"JOIN {t['job']} j ON j.id = e.job_id LEFT JOIN qp ON qp.project_id = j.project_id "
        f"AND qp.flavor_id = j.flavor_id "
        f"WHERE e.time >= {ts('start')} AND e.time < {ts('end')}{filters}{pool_of_job} "
        f"AND (e.kind = '{EventKind.REQUEUED.value}' "
        f"OR (e.kind = '{EventKind.ENDED.value}' AND e.state IN ({failed}))) "
        "GROUP BY j.project_id",
        scope.params,
    )


def _shape(
    counts: dict[tuple[Any, Any], list[float]],
    medians: dict[Any, Any],
    failures: int,
    requeues: int,
    names: Names,
) -> dict[str, Any]:
    by_tier_class: list[dict[str, Any]] = []
    total_count, total_lost = 0, 0.0
    for (tier_id, class_id), (count, lost, early) in counts.items():
        tier, klass = names.tiers.get(tier_id), names.classes.get(class_id)
        total_count += int(count)
        total_lost += lost
        by_tier_class.append(
            {
                "tier": tier.slug if tier else None,
                "preemption_class": klass.slug if klass else None,
                "class_kind": klass.kind if klass else None,
                "class_min_runtime_minutes": klass.min_runtime_minutes if klass else None,
                "count": int(count),
                "early": int(early),
                "gpu_hours_lost": gh(lost),
                "restart_p50_seconds": r3(medians.get((tier_id, class_id))),
                "_rank": (tier is None, -(tier.score if tier else 0), klass.slug if klass else ""),
            }
        )
    by_tier_class.sort(key=lambda r: r["_rank"])
    for item in by_tier_class:
        del item["_rank"]
    return {
        "total": {
            "count": total_count,
            "gpu_hours_lost": gh(total_lost),
            "restart_p50_seconds": r3(medians.get("all")),
            "failures": failures,
            "requeues": requeues,
        },
        "by_tier_class": by_tier_class,
    }


def preemptions(
    scope: Scope, t: dict[str, str], names: Names
) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """The preemptions of the scope, and of each project (as with the project as scope)."""
    counts: dict[tuple[Any, Any], list[float]] = defaultdict(lambda: [0, 0.0, 0])
    project_counts: dict[int, dict[tuple[Any, Any], list[float]]] = defaultdict(
        lambda: defaultdict(lambda: [0, 0.0, 0])
    )
    medians: dict[Any, Any] = {}
    project_medians: dict[int, dict[Any, Any]] = defaultdict(dict)
    fails: dict[int | None, tuple[int, int]] = {}
    for row in _query(scope, t, names):
        kind, k1, k2, k3 = row[0], key_id(row[1]), key_id(row[2]), key_id(row[3])
        if kind == "count":
            for target in (counts[(k2, k3)], *(
                [project_counts[k1][(k2, k3)]] if k1 is not None else []
            )):  # fmt: skip
                target[0] += int(row[4])
                target[1] += float(row[5] or 0)
                target[2] += int(row[6] or 0)
        elif kind == "fail":
            fails[k1] = (int(row[4] or 0), int(row[5] or 0))
        elif kind == "all":
            medians["all"] = row[5]
        elif kind == "tc":
            medians[(k1, k2)] = row[5]
        elif kind == "p_all" and k1 is not None:
            project_medians[k1]["all"] = row[5]
        elif kind == "p_tc" and k1 is not None:
            project_medians[k1][(k2, k3)] = row[5]
    overall = _shape(
        counts,
        medians,
        sum(failed for failed, _requeued in fails.values()),
        sum(requeued for _failed, requeued in fails.values()),
        names,
    )
    per_project = {}
    for project_id in {*project_counts, *(key for key in fails if key is not None)}:
        failed, requeued = fails.get(project_id, (0, 0))
        per_project[project_id] = _shape(
            project_counts.get(project_id, {}),
            project_medians.get(project_id, {}),
            failed,
            requeued,
            names,
        )
    return overall, per_project
