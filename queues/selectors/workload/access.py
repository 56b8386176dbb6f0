"""Whose jobs a person may see: the jobs, a project's workload page and one job."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404

from governance.models import Project
from queues.models import WorkloadJob


def user_can_see_all_jobs(user: Any) -> bool:
    return bool(
        user.is_authenticated
        and (getattr(user, "is_ops", False) or getattr(user, "is_approver", False))
    )


def visible_jobs(*, user: Any) -> QuerySet[WorkloadJob]:
    """Ops and approvers see every job; others the jobs of their projects."""
    jobs = WorkloadJob.objects.all()
    if not user.is_authenticated:
        return jobs.none()
    if user_can_see_all_jobs(user):
        return jobs
    return jobs.filter(project__memberships__user=user)


def workload_project_get(*, user: Any, slug: str) -> Project:
    """The project whose jobs ``user`` may see (the job page's rule: ops and approvers every
    project's, others their projects'); a 404 otherwise, as for one of its jobs."""
    if not user.is_authenticated:
        raise Http404
    projects = Project.objects.filter(slug=slug)
    if not user_can_see_all_jobs(user):
        projects = projects.filter(memberships__user=user)
    project = projects.first()  # one query, the membership joined
    if project is None:
        raise Http404
    return project


def job_get(*, user: Any, job_id: str, source: str = "") -> WorkloadJob:
    """The job (404 when unknown, ambiguous without a source, or not the user's to see).

    A scheduler that reused the id (Slurm after a reset) has several jobs of that id in one
    source: the latest submitted is the one meant."""
    jobs = visible_jobs(user=user).filter(job_id=job_id.strip()[:200])
    if source:
        jobs = jobs.filter(source=source)
    found = list(
        jobs.select_related("project", "tier", "flavor", "cluster").order_by(
            "-submitted_at", "-last_event_at", "-pk"
        )[:10]
    )
    if not found or (not source and len({job.source for job in found}) > 1):
        raise Http404
    return found[0]
