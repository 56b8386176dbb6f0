"""A replay's figures in the monthly review's terms (no Django).

The same quantities, names and definitions as the review (``reports.selectors.review``), so
that a replay's result reads like a review of the same window:

- **waits** (``waits.wait_stats``): per job, its first start − its arrival; a job not started
  by the window's end is censored there (``waiting_at_end``) and counts with the wait it had;
  ``p50``/``p90``/``p99`` are linear-interpolation percentiles (``percentile_cont``) in
  seconds, ``max`` the longest; ``over_threshold`` counts the waits above the tier's wait
  alert (``PriorityTier.wait_alert_minutes``), by the tier the job ran (or waited) at.
  ``never_started`` counts the jobs without a start by the window's end (those censored, and
  those above a per-job cap, which never start).
- **service** (``service.by_project``): GPU-hours received, ``share`` of all GPU-hours
  received, ``guarantee_gpus`` and ``guarantee_share`` of the GPUs, ``guaranteed_gpu_hours``
  (guarantee × the window's hours), ``borrowed_gpu_hours`` (used above the guarantee).
- **preemptions**: how many, and GPU-hours lost (work redone plus the requeue cost).
- **capacity**: idle GPU-hours per flavor and in all.

GPU-hours are rounded to 0.01 and seconds to 0.001, as the review rounds them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from .engine import Result
from .rules import Rules


def _gh(seconds: float) -> float:
    return round(float(seconds) / 3600.0, 2)


def _r3(value: float | None) -> float | None:
    return None if value is None else round(float(value), 3)


def percentile(sorted_values: list[float], fraction: float) -> float | None:
    """``percentile_cont``: linear interpolation between the closest ranks."""
    if not sorted_values:
        return None
    position = fraction * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def wait_stats(waits: Iterable[tuple[float, bool, bool]]) -> dict[str, Any]:
    """WaitStats of ``(wait seconds, censored, over the tier's alert)`` triples."""
    rows = list(waits)
    values = sorted(wait for wait, _censored, _over in rows)
    return {
        "jobs": len(rows),
        "waiting_at_end": sum(1 for _wait, censored, _over in rows if censored),
        "never_started": sum(1 for _wait, censored, _over in rows if censored),
        "p50": _r3(percentile(values, 0.5)),
        "p90": _r3(percentile(values, 0.9)),
        "p99": _r3(percentile(values, 0.99)),
        "max": _r3(values[-1]) if values else None,
        "over_threshold": sum(1 for _wait, _censored, over in rows if over),
    }


def summarize(
    result: Result, *, rules: Rules, wait_alerts: Mapping[str, int | None]
) -> dict[str, Any]:
    """The review's figures of one replay: overall, per tier and per project.

    ``rules`` are those in force at the window's start (the guarantees and capacity the
    service shares are measured against); ``wait_alerts`` the tiers' wait alerts in minutes.
    """
    begin, horizon = result.begin, result.horizon
    hours = max(0.0, horizon - begin) / 3600.0
    waits_by: dict[tuple[str, str], list[tuple[float, bool, bool]]] = defaultdict(list)
    preempt: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for index, job in enumerate(result.jobs):
        if job.arrival >= horizon:
            continue
        start = result.start[index]
        censored = math.isnan(start) or start > horizon
        wait = (horizon if censored else start) - job.arrival
        tier = result.tiers[index]
        alert = wait_alerts.get(tier)
        one = (max(0.0, wait), censored, alert is not None and wait > alert * 60)
        for key in (("all", ""), ("tier", tier), ("project", job.project)):
            waits_by[key].append(one)
            preempt[key][0] += result.preemptions[index]
            preempt[key][1] += result.lost_gpu_seconds[index]

    def group(kind: str) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for (key_kind, name), rows in sorted(waits_by.items()):
            if key_kind != kind:
                continue
            count, lost = preempt[(key_kind, name)]
            out[name] = {
                **wait_stats(rows),
                "preemptions": int(count),
                "gpu_hours_lost": _gh(lost),
            }
        return out

    used: dict[str, float] = defaultdict(float)
    borrowed: dict[str, float] = defaultdict(float)
    for (project, _flavor), seconds in result.used_gpu_seconds.items():
        used[project] += seconds
    for (project, _flavor), seconds in result.borrowed_gpu_seconds.items():
        borrowed[project] += seconds
    guarantee: dict[str, float] = defaultdict(float)
    for quota in rules.quotas:
        guarantee[quota.project] += quota.guarantee
    capacity = sum(rules.capacity.values())
    total_used = sum(used.values())
    projects = group("project")
    for name in sorted(set(used) | set(guarantee) | set(projects)):
        row = projects.setdefault(name, {**wait_stats(()), "preemptions": 0, "gpu_hours_lost": 0.0})
        row.update(
            gpu_hours=_gh(used[name]),
            share=round(used[name] / total_used, 4) if total_used else 0.0,
            guarantee_gpus=guarantee[name],
            guarantee_share=round(guarantee[name] / capacity, 4) if capacity else 0.0,
            guaranteed_gpu_hours=round(guarantee[name] * hours, 2),
            borrowed_gpu_hours=_gh(borrowed[name]),
        )
    overall = group("all").get("", {**wait_stats(()), "preemptions": 0, "gpu_hours_lost": 0.0})
    overall.update(
        gpu_hours=_gh(total_used),
        borrowed_gpu_hours=_gh(sum(borrowed.values())),
        idle_gpu_hours=_gh(sum(result.idle_gpu_seconds.values())),
    )
    tier_order = [tier.slug for tier in rules.tiers]
    tiers = group("tier")
    return {
        "all": overall,
        "tiers": {slug: tiers[slug] for slug in [*tier_order, *sorted(tiers)] if slug in tiers},
        "projects": projects,
        "idle_gpu_hours": {
            flavor: _gh(seconds) for flavor, seconds in sorted(result.idle_gpu_seconds.items())
        },
    }


# Whether a larger value of a figure is better (True), worse (False); the others are neutral.
HIGHER_IS_BETTER = {
    "p50": False,
    "p90": False,
    "p99": False,
    "over_threshold": False,
    "never_started": False,
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
    change = round(float(after) - float(before), 3)
    if abs(change) < 1e-9:
        return {"value": 0.0, "verdict": "same"}
    direction = HIGHER_IS_BETTER.get(name)
    if direction is None:
        return {"value": change, "verdict": "neutral"}
    return {"value": change, "verdict": "better" if (change > 0) == direction else "worse"}
