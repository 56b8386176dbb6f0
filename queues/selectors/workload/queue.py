"""Where a job stands in its flavor's queue: the GPUs each project uses of a flavor, the queue's
state and the diagnosis of one job's wait."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, Sum

from governance.models import GpuFlavor, PoolCapacity, PriorityTier, Project
from governance.selectors import effective_rules
from queues.models import JobState, WaitCategory, WorkloadJob
from queues.schedulers.classify import slurm_reason_token

from .. import definitions, diagnosis


@dataclass
class FlavorUse:
    flavor: GpuFlavor | None
    guarantee: int = 0
    maximum: int | None = 0
    running: float = 0  # GPUs running (definitions.running_gpus), fractions kept
    pending: float = 0

    @property
    def at_limit(self) -> bool:
        return self.maximum is not None and self.running >= self.maximum


def project_flavor_use(
    project: Project, *, at: datetime, source: str = "", pool_id: int | None = None
) -> list[FlavorUse]:
    """The project's effective guarantee and maximum per flavor (over pools, or in pool
    ``pool_id`` alone: a job's answer never mixes quotas of different pools), against the
    GPUs its jobs run and ask for now (of ``source`` alone when given; effective rules: four
    queries; usage: one)."""
    rules = effective_rules(at=at, project_slugs=[project.slug]).projects.get(project.slug)
    uses: dict[int | None, FlavorUse] = {}
    for quota in rules.quotas if rules else ():
        if pool_id is not None and quota.quota.pool_id != pool_id:
            continue
        use = uses.setdefault(quota.quota.flavor.pk, FlavorUse(flavor=quota.quota.flavor))
        use.guarantee += quota.guarantee
        top = quota.maximum
        use.maximum = None if top is None or use.maximum is None else use.maximum + top
    jobs = WorkloadJob.objects.filter(
        project=project, state__in=[JobState.RUNNING, JobState.PENDING]
    )
    if source:
        jobs = jobs.filter(source=source)
    grouped = jobs.values_list("flavor_id", "cluster_id", "pool_id").annotate(
        running=definitions.running_gpus_sum(),
        pending=Sum("gpus", filter=Q(state=JobState.PENDING), default=0.0),
    )
    maps = definitions.pool_maps() if pool_id is not None else None
    rows = []
    for flavor_id, cluster_id, pool, running, pending in grouped:
        if maps is not None:
            probe = WorkloadJob(
                project_id=project.pk, flavor_id=flavor_id, cluster_id=cluster_id, pool_id=pool
            )
            if definitions.job_pool_id(job=probe, maps=maps) != pool_id:
                continue
        rows.append((flavor_id, running, pending))
    flavors = {use.flavor.pk: use.flavor for use in uses.values() if use.flavor}
    for flavor_id, running, pending in rows:
        if flavor_id not in uses:
            flavor: GpuFlavor | None = flavors.get(flavor_id) or (
                GpuFlavor.objects.filter(pk=flavor_id).first() if flavor_id else None
            )
            uses[flavor_id] = FlavorUse(flavor=flavor, maximum=None)
        uses[flavor_id].running += running
        uses[flavor_id].pending += pending
    return sorted(uses.values(), key=lambda use: use.flavor.name if use.flavor else "")


def queue_state(job: WorkloadJob, *, now: datetime) -> tuple[diagnosis.QueueState, int | None]:
    """What ``diagnose`` reads, from the job's own source only: the GPUs running now per
    (project, tier, user, flavor, pool), the other pending jobs of the job's flavor, the
    project's effective maxima, the tiers' caps and the declared capacity of the job's pool
    and its cluster's pools; and the job's pool (a fixed number of queries)."""
    maps = definitions.pool_maps()
    pool_id = definitions.job_pool_id(job=job, maps=maps)
    tiers = {
        tier.pk: diagnosis.TierRule(
            score=tier.score, max_total=tier.max_gpus_total, max_per_job=tier.max_gpus_per_job
        )
        for tier in PriorityTier.objects.all()
    }
    running = []
    rows = definitions.running_gpus(
        WorkloadJob.objects.filter(source=job.source),
        by=("project_id", "tier_id", "user_name", "flavor_id", "cluster_id", "pool_id"),
    )
    for (project_id, tier_id, user, flavor_id, cluster_id, pool), total in rows.items():
        probe = WorkloadJob(
            project_id=project_id, flavor_id=flavor_id, cluster_id=cluster_id, pool_id=pool
        )
        running.append(
            diagnosis.Running(
                project=project_id,
                tier=tier_id,
                user=user,
                flavor=flavor_id,
                pool=definitions.job_pool_id(job=probe, maps=maps),
                gpus=float(total or 0),
            )
        )
    waiting = []
    others = (
        WorkloadJob.objects.filter(source=job.source, state=JobState.PENDING, flavor=job.flavor)
        .exclude(pk=job.pk)
        .values_list(
            "job_id",
            "project_id",
            "tier_id",
            "flavor_id",
            "cluster_id",
            "pool_id",
            "gpus",
            "submitted_at",
            "reason",
        )
    )
    for job_id, project_id, tier_id, flavor_id, cluster_id, pool, gpus, submitted, reason in others:
        probe = WorkloadJob(
            project_id=project_id, flavor_id=flavor_id, cluster_id=cluster_id, pool_id=pool
        )
        rule = tiers.get(tier_id) if tier_id is not None else None
        waiting.append(
            diagnosis.Waiting(
                job_id=job_id,
                project=project_id,
                tier=tier_id,
                tier_score=rule.score if rule else 0,
                flavor=flavor_id,
                pool=definitions.job_pool_id(job=probe, maps=maps),
                gpus=float(gpus),
                submitted=submitted,
                reason=slurm_reason_token(reason),
            )
        )
    quotas = _project_maxima(job, now=now)
    capacity = _declared_capacity(job, pool_id)
    state = diagnosis.QueueState(
        running=running, waiting=waiting, quotas=quotas, tiers=tiers, capacity=capacity
    )
    return state, pool_id


def _project_maxima(job: WorkloadJob, *, now: datetime) -> dict[tuple[int, int, int], int | None]:
    """The effective maximum of each quota of the job's project, per (project, pool, flavor)."""
    quotas: dict[tuple[int, int, int], int | None] = {}
    if job.project is not None:
        rules = effective_rules(at=now, project_slugs=[job.project.slug]).projects
        for quota in rules[job.project.slug].quotas if job.project.slug in rules else ():
            key = (job.project.pk, quota.quota.pool_id, quota.quota.flavor_id)
            quotas[key] = quota.maximum
    return quotas


def _declared_capacity(job: WorkloadJob, pool_id: int | None) -> dict[tuple[int, int], int]:
    """The declared capacity of the job's pool and of its cluster's pools."""
    pools = Q(pool_id=pool_id) if pool_id is not None else Q(pk__in=[])
    if job.cluster_id is not None:
        pools |= Q(pool__clusters=job.cluster_id)
    capacity = {
        (pool, flavor): gpus
        for pool, flavor, gpus in PoolCapacity.objects.filter(pools)
        .distinct()
        .values_list("pool_id", "flavor_id", "gpus")
    }
    return capacity


def job_diagnosis(job: WorkloadJob, *, now: datetime, live: Any = None) -> diagnosis.Diagnosis:
    """Why the job waits; ``live``: what Slurm holds for it now (``services.job_live_wait``),
    whose figures then replace Arbiter's records."""
    state, pool_id = queue_state(job, now=now)
    state.live = live
    if state.live is not None and pool_id is not None and job.flavor_id is not None:
        state.declared = state.capacity.get((pool_id, job.flavor_id))
    asked = diagnosis.Asked(
        job_id=job.job_id,
        project=job.project_id,
        tier=job.tier_id,
        user=job.user_name,
        flavor=job.flavor_id,
        pool=pool_id,
        gpus=float(job.gpus),
        submitted=job.submitted_at,
        reason=slurm_reason_token(job.reason),
        category=job.category or WaitCategory.UNCLASSIFIED,
        constraints=job.constraints,
    )
    return diagnosis.diagnose(state, asked)
