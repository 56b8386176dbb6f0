"""A replay's output in the rows the monthly review reads (no Django).

The replay computes no figure of its own. ``queues.services.replay`` stores, per run and side,
what the evidence's review reads, in the same columns, and ``reports.selectors.change_replay``
runs the review's own queries over those rows:

- each replayed job's first wait (``queues.models.ReplayWait``, ``WorkloadWait``'s columns:
  ``queues.services.replay.replay_waits``);
- ``hour_rows``: per UTC hour, flavor, project and tier, the GPU-seconds run and the
  job-seconds waiting on quota and waiting for resources (``queues.models.ReplayHour``,
  ``WorkloadHour``'s columns): the review's service, borrowing and idle capacity;
- ``preemption_rows``: one row per preemption with the columns the review's preemption query
  derives from the events (``queues.models.ReplayPreemption``): its counts, GPU-hours lost
  and the preemptions before a class's minimum runtime.

``delta`` marks a figure's change better or worse for the replay's page.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from .engine import REASON_CATEGORY, Result

HOUR = 3600

# (hour start, flavor ``pool/flavor``, project, tier) -> [GPU-seconds run, job-seconds waiting
# on quota, job-seconds waiting for resources]
HourKey = tuple[int, str, str, str]
# (time, GPUs, project, tier, class, flavor, the run's start, the next start or None)
PreemptionRow = tuple[float, float, str, str, str, str, float, float | None]

WAIT_COLUMN = {"quota": 1, "resource": 2}


def _by_hour(begin: float, finish: float) -> list[tuple[int, float]]:
    """The seconds of ``[begin, finish)`` in each UTC hour it overlaps."""
    pieces = []
    hour = int(begin // HOUR) * HOUR
    while hour < finish:
        seconds = min(finish, hour + HOUR) - max(begin, hour)
        if seconds > 0:
            pieces.append((hour, seconds))
        hour += HOUR
    return pieces


def _waiting(result: Result, j: int, runs: list[tuple[float, float]]) -> list[list[float]]:
    """When job ``j`` waited: from its arrival (and each preemption) to its next start; to
    its cancellation, or the horizon, when it did not start again."""
    job = result.jobs[j]
    stop = result.cancelled.get(j, result.horizon)
    intervals, at = [], job.arrival
    for begin, finish in runs:
        if begin > at:
            intervals.append([at, begin])
        at = max(at, finish)
    if math.isnan(result.end[j]) and at < stop:
        intervals.append([at, stop])
    return intervals


def _categorized(
    intervals: list[list[float]], reasons: list[tuple[float, str]]
) -> list[tuple[str, float, float]]:
    """The waiting ``intervals`` cut where the job's reason changed, each piece in the wait
    category of the reason it waited for then (``REASON_CATEGORY``; "" for none)."""
    pieces = []
    for begin, finish in intervals:
        token = ""
        cuts = []
        for since, said in reasons:
            if since <= begin:
                token = said
            elif since < finish:
                cuts.append((since, said))
        at = begin
        for since, said in cuts:
            pieces.append((REASON_CATEGORY.get(token, ""), at, since))
            at, token = since, said
        pieces.append((REASON_CATEGORY.get(token, ""), at, finish))
    return pieces


def _per_job(result: Result) -> tuple[dict[int, list[tuple[float, float]]], dict[int, list]]:
    runs: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for j, begin, finish in result.runs:
        runs[j].append((begin, finish))
    for intervals in runs.values():
        intervals.sort()
    reasons: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for j, since, token in result.reasons:
        reasons[j].append((since, token))
    return runs, reasons


def hour_rows(result: Result) -> dict[HourKey, list[float]]:
    """What each replayed job adds to the hours of ``[begin, horizon)``, as the evidence's
    rollup adds it to ``WorkloadHour``: GPUs × seconds running, at the tier it ran at; and
    the seconds it waited, on quota or for resources by the reason it waited for then."""
    runs, reasons = _per_job(result)
    rows: dict[HourKey, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    begin, horizon = result.begin, result.horizon
    for j, job in enumerate(result.jobs):
        if job.arrival >= horizon:
            continue
        key = (job.flavor, job.project, result.tiers[j])
        for start, finish in runs.get(j, []):
            for hour, seconds in _by_hour(max(start, begin), min(finish, horizon)):
                rows[(hour, *key)][0] += seconds * job.gpus
        waited = _waiting(result, j, runs.get(j, []))
        for category, start, finish in _categorized(waited, reasons.get(j, [])):
            column = WAIT_COLUMN.get(category)
            if column is None:
                continue
            for hour, seconds in _by_hour(max(start, begin), min(finish, horizon)):
                rows[(hour, *key)][column] += seconds
    return dict(rows)


def preemption_rows(result: Result) -> list[PreemptionRow]:
    """Each preemption as the review's preemption query derives it from the events: when,
    the job's GPUs, project, tier (the one it ran at) and class, its flavor, the start of the
    run it stopped and the job's next start (``None`` if it did not start again)."""
    runs, _reasons = _per_job(result)
    rows = []
    for victim, _by, at, _why in result.preempted_by:
        job = result.jobs[victim]
        mine = runs.get(victim, [])
        stopped = next(k for k, (_begin, finish) in enumerate(mine) if finish == at)
        restart = mine[stopped + 1][0] if stopped + 1 < len(mine) else None
        classes = result.classes
        rows.append(
            (
                at,
                job.gpus,
                job.project,
                result.tiers[victim],
                classes[victim] if victim < len(classes) else "",
                job.flavor,
                mine[stopped][0],
                restart,
            )
        )
    return rows


# Whether a larger value of a figure is better (True), worse (False); the others are neutral.
# "wait" stands for every wait figure of the review (a wait, or a count of jobs that waited).
HIGHER_IS_BETTER = {
    "wait": False,
    "preemptions": False,
    "gpu_hours_lost": False,
    "idle_gpu_hours": False,
    "gpu_hours": True,
}


def delta(name: str, before: Any, after: Any) -> dict[str, Any]:
    """``after − before`` and whether it is ``better``, ``worse`` or ``same`` (``neutral``
    for a figure with no better direction, ``unknown`` when either side has no value)."""
    if before is None or after is None:
        return {"value": None, "verdict": "unknown"}
    change: float = round(float(after) - float(before), 3)
    if isinstance(before, int) and isinstance(after, int):
        change = after - before  # a count changes by a count
    if abs(change) < 1e-9:
        return {"value": 0.0, "verdict": "same"}
    direction = HIGHER_IS_BETTER.get(name)
    if direction is None:
        return {"value": change, "verdict": "neutral"}
    return {"value": change, "verdict": "better" if (change > 0) == direction else "worse"}
