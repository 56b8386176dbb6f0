"""The signed-in person's own waiting jobs, each with its answer, and the approved exceptions
that have not reached a job's scheduler yet."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from governance.models import Grant
from governance.models.grants import grant_in_force_q
from queues.models import JobState, WorkloadJob

from .workload import WaitExplanation, job_wait_explanation, visible_jobs

MY_JOBS_SHOWN = 20


def my_waiting_jobs(
    *, user: Any, now: datetime | None = None, limit: int = MY_JOBS_SHOWN
) -> tuple[list[WaitExplanation], int]:
    """The pending jobs the scheduler lists under the person's user name (among the jobs they
    may see), longest waiting first, each with why it waits; and how many there are."""
    now = now or timezone.now()
    jobs = (
        visible_jobs(user=user)
        .filter(state=JobState.PENDING, user_name=user.get_username())
        .select_related("project", "tier", "flavor", "cluster")
        .order_by("submitted_at", "pk")
    )
    total = jobs.count()
    return [job_wait_explanation(job, now=now) for job in jobs[:limit]], total


@dataclass
class UnsyncedGrant:
    grant: Grant
    reason: str  # "no_cluster" (no cluster Arbiter syncs runs the job) or "not_synced"


def grants_not_on_scheduler(job: WorkloadJob, *, now: datetime) -> list[UnsyncedGrant]:
    """The project's approved exceptions in force now that the job's scheduler does not apply
    yet: Arbiter counts them, the scheduler still holds the job by the old rules until a sync
    writes them (or never, where no cluster Arbiter syncs runs the job)."""
    if job.project_id is None:
        return []
    # The exceptions that concern the job: the project's, in the job's pool and flavor when
    # the exception names them.
    found_grants = Grant.objects.filter(grant_in_force_q(now), project_id=job.project_id)
    if job.pool_id is not None:
        found_grants = found_grants.filter(Q(pool__isnull=True) | Q(pool_id=job.pool_id))
    if job.flavor_id is not None:
        found_grants = found_grants.filter(Q(flavor__isnull=True) | Q(flavor_id=job.flavor_id))
    grants = list(found_grants.order_by("starts_at", "pk"))
    if not grants:
        return []
    cluster = job.cluster
    state = getattr(cluster, "sync_state", None) if cluster is not None else None
    applied_at = getattr(state, "applied_at", None)
    found = []
    for grant in grants:
        if cluster is None:
            found.append(UnsyncedGrant(grant, "no_cluster"))
        elif applied_at is None or applied_at < max(grant.created_at, grant.starts_at):
            found.append(UnsyncedGrant(grant, "not_synced"))
    return found
