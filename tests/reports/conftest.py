"""Hand-made review metrics in the shape of contract B (``reports.selectors.review_metrics``),
and a stand-in for that selector in the tests of the pages, the findings and the builds:
they check what is done with the metrics, not how they are computed (the metrics have tests
of their own, on a hand-made history)."""

import copy
from datetime import datetime
from typing import Any

import pytest

from reports import selectors


def wait_stats(jobs: int, p50: float | None, p90: float | None, **extra: Any) -> dict[str, Any]:
    return {
        "jobs": jobs,
        "never_started": extra.pop("never_started", 0),
        "waiting_at_end": extra.pop("waiting_at_end", 0),
        "p50": p50,
        "p90": p90,
        "p95": extra.pop("p95", p90),
        "p99": extra.pop("p99", p90),
        "mean": extra.pop("mean", p50),
        "max": extra.pop("max", p90),
        "over_threshold": extra.pop("over_threshold", 0),
        **extra,
    }


def capacity(available: float, allocated: float, idle_waiting: float = 0.0) -> dict[str, float]:
    return {
        "available_gpu_hours": available,
        "allocated_gpu_hours": allocated,
        "idle_gpu_hours": round(available - allocated, 2),
        "idle_while_quota_waiting_gpu_hours": idle_waiting,
    }


def service_row(project: str, name: str, **values: Any) -> dict[str, Any]:
    row = {
        "project": project,
        "name": name,
        "pool": "training",
        "gpu_hours": 0.0,
        "share": 0.0,
        "guarantee_gpus": 0,
        "guarantee_share": 0.0,
        "guaranteed_gpu_hours": 0.0,
        "within_guarantee_gpu_hours": 0.0,
        "borrowed_gpu_hours": 0.0,
        "lent_gpu_hours": 0.0,
        "quota_wait_hours": 0.0,
        "resource_wait_below_guarantee_hours": 0.0,
    }
    row.update(values)
    return row


def sample_metrics(
    *, start: datetime, end: datetime, pool: str | None = None, project: str | None = None
) -> dict[str, Any]:
    """A month of the ``world`` fixture: Vision starved (8 of 24 guaranteed GPUs' hours while
    its jobs waited for free GPUs below its guarantee; it waited on quota too), Speech hoarding
    (16 guaranteed, nearly idle), Key-project waits over their threshold, Vision over the
    policy's exception count."""
    hours = (end - start).total_seconds() / 3600
    vision = service_row(
        "vision",
        "Vision",
        gpu_hours=1000.0,
        share=0.6,
        guarantee_gpus=24,
        guarantee_share=0.375,
        guaranteed_gpu_hours=round(24 * hours, 2),
        within_guarantee_gpu_hours=1000.0,
        quota_wait_hours=120.0,
        resource_wait_below_guarantee_hours=120.0,
    )
    speech = service_row(
        "speech",
        "Speech",
        gpu_hours=650.0,
        share=0.4,
        guarantee_gpus=16,
        guarantee_share=0.25,
        guaranteed_gpu_hours=round(16 * hours, 2),
        within_guarantee_gpu_hours=600.0,
        borrowed_gpu_hours=50.0,
        lent_gpu_hours=40.0,
    )
    service = [vision, speech]
    if project:
        service = [row for row in service if row["project"] == project]
    metrics = {
        "window": {"start": start.isoformat(), "end": end.isoformat(), "hours": hours},
        "scope": {"pool": pool, "project": project},
        "waits": {
            "overall": wait_stats(300, 120.0, 5400.0, waiting_at_end=3, max=20000.0),
            "by_tier": [
                wait_stats(
                    100,
                    300.0,
                    7200.0,
                    tier="key",
                    name="Key project",
                    threshold_seconds=3600,
                    over_threshold=14,
                ),
                wait_stats(
                    200, 60.0, 900.0, tier="regular", name="Regular", threshold_seconds=None
                ),
            ],
            "by_project": [
                wait_stats(150, 600.0, 7200.0, project="vision", name="Vision", tier="key"),
                wait_stats(150, 60.0, 600.0, project="speech", name="Speech", tier=None),
            ],
            "by_pool": [wait_stats(300, 120.0, 5400.0, pool="training", name="Training")],
            "by_flavor": [wait_stats(300, 120.0, 5400.0, flavor="a100-80g", name="A100 80G")],
            "by_category": [
                {
                    "category": "quota_limit",
                    "label": "Quota limit",
                    "jobs": 40,
                    "wait_seconds": 72000.0,
                },
                {
                    "category": "resource_shortage",
                    "label": "Resource shortage",
                    "jobs": 10,
                    "wait_seconds": 3600.0,
                },
            ],
            "daily_by_tier": [
                {
                    "day": start.date().isoformat(),
                    "tier": "key",
                    "p50": 300.0,
                    "p90": 7000.0,
                    "p99": 7100.0,
                    "jobs": 50,
                },
                {
                    "day": start.date().isoformat(),
                    "tier": "regular",
                    "p50": 60.0,
                    "p90": 900.0,
                    "p99": 950.0,
                    "jobs": 100,
                },
            ],
        },
        "service": {"by_project": service},
        "capacity": {
            "total": capacity(round(64 * hours, 2), 1650.0, 310.5),
            "by_pool_flavor": [
                {
                    **capacity(round(64 * hours, 2), 1650.0, 310.5),
                    "pool": "training",
                    "flavor": "a100-80g",
                    "pool_name": "Training",
                    "flavor_name": "A100 80G",
                }
            ],
            "daily": [
                {"day": start.date().isoformat(), **capacity(1536.0, 800.0, 310.5)},
            ],
        },
        "exceptions": {
            "by_project_kind": [
                {
                    "project": "vision",
                    "name": "Vision",
                    "kind": "queue_jump",
                    "requested": 5,
                    "approved": 3,
                    "rejected": 2,
                    "gpu_hours": 96.0,
                }
            ],
            "policy_monthly_limit": 3,
            "over_policy": [{"project": "vision", "name": "Vision", "count": 5, "limit": 3}],
        },
        "preemptions": {
            "total": {
                "count": 4,
                "gpu_hours_lost": 12.5,
                "restart_p50_seconds": 600.0,
                "failures": 2,
                "requeues": 4,
            },
            "by_tier_class": [
                {
                    "tier": "regular",
                    "preemption_class": "allowed",
                    "count": 4,
                    "gpu_hours_lost": 12.5,
                    "restart_p50_seconds": 600.0,
                }
            ],
        },
        "timeline": [
            {
                "at": start.replace(day=10).isoformat(),
                "kind": "change",
                "title": "Raise Vision's guarantee",
                "object": "Quota",
                "id": 1,
            },
            {
                "at": start.replace(day=12).isoformat(),
                "kind": "grant",
                "title": "Queue jump for Vision",
                "object": "Vision",
                "id": 1,
            },
        ],
    }
    return copy.deepcopy(metrics)


def by_project(metrics_of: Any) -> Any:
    """A stand-in for ``review_metrics_by_project`` from one for ``review_metrics``."""

    def review_metrics_by_project(
        **kwargs: Any,
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        metrics = metrics_of(**kwargs)
        slugs = {row["project"] for row in metrics["service"]["by_project"]}
        slugs |= {row["project"] for row in metrics["waits"]["by_project"]}
        return metrics, {slug: metrics_of(**kwargs, project=slug) for slug in sorted(slugs)}

    return review_metrics_by_project


@pytest.fixture
def fake_metrics(monkeypatch):
    """``review_metrics`` and ``review_metrics_by_project`` answer with ``sample_metrics``;
    returns the list of their calls."""
    calls: list[dict[str, Any]] = []

    def review_metrics(**kwargs: Any) -> dict[str, Any]:
        calls.append(kwargs)
        return sample_metrics(**kwargs)

    def review_metrics_by_project(
        **kwargs: Any,
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        calls.append({**kwargs, "project": None, "by_project": True})
        return by_project(sample_metrics)(**kwargs)

    monkeypatch.setattr(selectors, "review_metrics", review_metrics, raising=False)
    monkeypatch.setattr(
        selectors, "review_metrics_by_project", review_metrics_by_project, raising=False
    )
    return calls


@pytest.fixture
def eager():
    """Tasks run in the test's process when queued (the worker test sends them for real)."""
    from governance.celery import app

    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False
