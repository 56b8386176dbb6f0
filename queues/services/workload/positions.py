"""Where a project stands against its quota: the input of the Kueue ``WaitingForQuota`` rule."""

from __future__ import annotations

from collections import defaultdict

from django.utils import timezone

from governance.selectors import effective_rules, pool_capacities, quota_maximum
from queues.models import WorkloadJob
from queues.schedulers.classify import QuotaPosition
from queues.selectors import definitions

from .ingest import PositionFor


def running_gpus() -> dict[tuple[int, int | None], float]:
    """GPUs running now per (project, flavor), from the jobs Arbiter knows (one query)."""
    running = definitions.running_gpus(
        WorkloadJob.objects.filter(project__isnull=False), by=("project_id", "flavor_id")
    )
    return {(project, flavor): total for (project, flavor), total in running.items()}


def quota_positions() -> PositionFor:
    """A function giving a job's ``QuotaPosition`` (effective quota of its project and flavor,
    summed over pools, against what its project runs of that flavor), or None when unknown."""
    rules = effective_rules(at=timezone.now())
    capacities = pool_capacities()
    quotas: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
    for project in rules.projects.values():
        for quota in project.quotas:
            entry = quotas[(project.project.pk, quota.quota.flavor_id)]
            entry[0] += quota.guarantee
            entry[1] += quota_maximum(quota, capacities)
    usage = running_gpus()

    def position_for(job: WorkloadJob) -> QuotaPosition | None:
        if job.project_id is None or job.flavor_id is None:
            return None
        entry = quotas.get((job.project_id, job.flavor_id))
        if entry is None:
            return None
        return QuotaPosition(
            used=usage.get((job.project_id, job.flavor_id), 0),
            guarantee=entry[0],
            maximum=entry[1],
            request=job.gpus,
        )

    return position_for
