"""The monthly review's metrics for a window (contract B in the project's helper contracts).

Placeholder shape first; the numbers are filled in by the following commits.
"""

from datetime import datetime
from typing import Any


def _wait_stats() -> dict[str, Any]:
    return {
        "jobs": 0,
        "waiting_at_end": 0,
        "p50": None,
        "p90": None,
        "p99": None,
        "max": None,
        "over_threshold": 0,
    }


def _capacity() -> dict[str, float]:
    return {
        "available_gpu_hours": 0.0,
        "allocated_gpu_hours": 0.0,
        "idle_gpu_hours": 0.0,
        "idle_while_quota_waiting_gpu_hours": 0.0,
    }


def review_metrics(
    *, start: datetime, end: datetime, pool: str | None = None, project: str | None = None
) -> dict[str, Any]:
    return {
        "window": {
            "start": start.isoformat(),
            "end": end.isoformat(),
            "hours": round((end - start).total_seconds() / 3600, 2),
        },
        "scope": {"pool": pool, "project": project},
        "waits": {
            "overall": _wait_stats(),
            "by_tier": [],
            "by_project": [],
            "by_pool": [],
            "by_flavor": [],
            "by_category": [],
            "daily_by_tier": [],
        },
        "service": {"by_project": []},
        "capacity": {"total": _capacity(), "by_pool_flavor": [], "daily": []},
        "exceptions": {"by_project_kind": [], "policy_monthly_limit": None, "over_policy": []},
        "preemptions": {
            "total": {
                "count": 0,
                "gpu_hours_lost": 0.0,
                "restart_p50_seconds": None,
                "failures": 0,
                "requeues": 0,
            },
            "by_tier_class": [],
        },
        "timeline": [],
    }
