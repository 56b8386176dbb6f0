"""What the parts of the review share: the window and scope as SQL parameters, table names,
the job → pool CTEs, rounding, and the objects the rows name."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from approvals.models import UpgradeRequest
from governance.models import (
    GpuFlavor,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PriorityTier,
    Project,
    Quota,
)
from queues.models import Cluster, WorkloadEvent, WorkloadHour, WorkloadJob, WorkloadWait

from .._sql import param


def r3(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)


def gh(seconds: float | None) -> float:
    """GPU-seconds as GPU-hours rounded to 0.01."""
    return round(float(seconds or 0) / 3600.0, 2)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


class Scope:
    """The window and scope as SQL parameters and filters."""

    def __init__(self, *, start: datetime, end: datetime, pool: str | None, project: str | None):
        self.start, self.end = start, end
        first_hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        self.hours = []
        hour = first_hour
        while hour < end:
            self.hours.append(hour)
            hour += timedelta(hours=1)
        self.pool_id: int | None = None
        self.project_id: int | None = None
        if pool is not None:
            self.pool_id = Pool.objects.filter(slug=pool).values_list("pk", flat=True).first() or -1
        if project is not None:
            self.project_id = (
                Project.objects.filter(slug=project).values_list("pk", flat=True).first() or -1
            )
        self.params: dict[str, Any] = {
            "start": param(start),
            "end": param(end),
            "hstart": param(first_hour),
            "pool": self.pool_id,
            "project": self.project_id,
        }


@dataclass
class Names:
    """The rules' objects by id (read once per review, whatever the number of projects)."""

    tiers: dict[int | None, PriorityTier]
    projects: dict[int | None, Project]
    pools: dict[int | None, Pool]
    flavors: dict[int | None, GpuFlavor]
    classes: dict[int | None, PreemptionClass]

    @classmethod
    def load(cls) -> Names:
        return cls(
            tiers={tier.pk: tier for tier in PriorityTier.objects.all()},
            projects={p.pk: p for p in Project.objects.select_related("tier").all()},
            pools={pool.pk: pool for pool in Pool.objects.all()},
            flavors={flavor.pk: flavor for flavor in GpuFlavor.objects.all()},
            classes={item.pk: item for item in PreemptionClass.objects.all()},
        )

    @property
    def default_tier(self) -> PriorityTier | None:
        return next((tier for tier in self.tiers.values() if tier.is_default), None)

    def tier_rank(self, tier_id: int | None) -> tuple[int, int, str]:
        tier = self.tiers.get(tier_id)
        return (1, 0, "") if tier is None else (0, -tier.score, tier.name)


def tables() -> dict[str, str]:
    return {
        "job": WorkloadJob._meta.db_table,
        "event": WorkloadEvent._meta.db_table,
        "hour": WorkloadHour._meta.db_table,
        "wait": WorkloadWait._meta.db_table,
        "quota": Quota._meta.db_table,
        "capacity": PoolCapacity._meta.db_table,
        "tier": PriorityTier._meta.db_table,
        "cluster_pools": Cluster.pools.through._meta.db_table,
        "request": UpgradeRequest._meta.db_table,
    }


def job_pool_ctes(t: dict[str, str]) -> str:
    """The CTE ``qp`` (project, flavor → quota pool and preemption class), for ``job_pool``."""
    return (
        f"qp AS (SELECT project_id, flavor_id, MIN(pool_id) AS pool_id, "
        f"MIN(preemption_class_id) AS class_id FROM {t['quota']} GROUP BY project_id, flavor_id)"
    )


def job_pool(t: dict[str, str]) -> str:
    """SQL for the pool of the job ``j`` with ``qp`` (``job_pool_ctes``) joined: the pool its
    source named, else its quota's pool, else its cluster's (the lowest id), read by a
    subquery only for the jobs without either: cheaper than a join per job when most jobs
    have one (``queues.selectors.definitions.job_pool_id``)."""
    return (
        f"COALESCE(j.pool_id, qp.pool_id, (SELECT MIN(c_.pool_id) FROM {t['cluster_pools']} c_ "
        f"WHERE c_.cluster_id = j.cluster_id))"
    )
