"""A replay's figures that the evidence's review reads from other tables (no Django).

The replay's **waits** are not computed here: each replayed job's first wait is stored as a
row in ``WorkloadWait``'s columns (``queues.models.ReplayWait``) and the monthly review's own
wait queries read those rows (``reports.selectors.change_replay``), so every wait figure the
review has (percentiles, over the tier's target, still waiting at the end, ...) is the
replay's too, by the same code.

What the review reads from the hourly rollup and the events, the replay has as integrals of
its simulation, summed here under the review's names and definitions, per tier (the tier a
job ran at) and per project:

- **service** (``service.by_project``): GPU-hours received, ``share`` of all GPU-hours
  received, ``guarantee_gpus`` and ``guarantee_share`` of the GPUs, ``guaranteed_gpu_hours``
  (guarantee × the window's hours), ``borrowed_gpu_hours`` (used above the guarantee).
- **preemptions**: how many, and GPU-hours lost (work redone plus the requeue cost).
- **capacity**: idle GPU-hours per flavor and in all.

GPU-hours are rounded to 0.01, as the review rounds them.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .engine import Result
from .rules import Rules


def _gh(seconds: float) -> float:
    return round(float(seconds) / 3600.0, 2)


def summarize(result: Result, *, rules: Rules) -> dict[str, Any]:
    """The service, preemption and idle figures of one replay: overall, per tier and per
    project. ``rules`` are those in force at the window's start (the guarantees and capacity
    the service shares are measured against)."""
    begin, horizon = result.begin, result.horizon
    hours = max(0.0, horizon - begin) / 3600.0
    preempt: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for index, job in enumerate(result.jobs):
        if job.arrival >= horizon:
            continue
        for key in (("all", ""), ("tier", result.tiers[index]), ("project", job.project)):
            preempt[key][0] += result.preemptions[index]
            preempt[key][1] += result.lost_gpu_seconds[index]

    def group(kind: str) -> dict[str, dict[str, Any]]:
        return {
            name: {"preemptions": int(count), "gpu_hours_lost": _gh(lost)}
            for (key_kind, name), (count, lost) in sorted(preempt.items())
            if key_kind == kind
        }

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
        row = projects.setdefault(name, {"preemptions": 0, "gpu_hours_lost": 0.0})
        row.update(
            gpu_hours=_gh(used[name]),
            share=round(used[name] / total_used, 4) if total_used else 0.0,
            guarantee_gpus=guarantee[name],
            guarantee_share=round(guarantee[name] / capacity, 4) if capacity else 0.0,
            guaranteed_gpu_hours=round(guarantee[name] * hours, 2),
            borrowed_gpu_hours=_gh(borrowed[name]),
        )
    overall = group("all").get("", {"preemptions": 0, "gpu_hours_lost": 0.0})
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
