"""A project's jobs and recent waits, and the jobs lists of the API."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Q, Sum
from django.utils import timezone

from governance.models import Project
from queues.models import JobState, WaitCategory, WorkloadJob

from .. import definitions
from .queue import FlavorUse, project_flavor_use


@dataclass
class ProjectWorkload:
    project: Project
    use: list[FlavorUse]
    pending_by_category: list[tuple[str, str, list[WorkloadJob]]]
    running: list[WorkloadJob]


PENDING_SHOWN = 200


def project_workload(*, project: Project, now: datetime | None = None) -> ProjectWorkload:
    """A project's pending jobs grouped by category and its running GPUs against guarantee and
    maximum (a fixed number of queries, whatever the number of jobs)."""
    now = now or timezone.now()
    jobs = list(
        WorkloadJob.objects.filter(project=project, state__in=[JobState.PENDING, JobState.RUNNING])
        .select_related("tier", "flavor")
        .order_by("submitted_at", "pk")[: PENDING_SHOWN * 2]
    )
    groups: dict[str, list[WorkloadJob]] = defaultdict(list)
    running = []
    starts = definitions.first_starts(job for job in jobs if job.is_pending)
    for job in jobs:
        if job.is_pending:
            wait = definitions.job_wait(job, now=now, started=starts.get(job.pk))
            job.waited = wait.seconds if wait else 0  # type: ignore[attr-defined]
            groups[job.category or WaitCategory.UNCLASSIFIED].append(job)
        else:
            running.append(job)
    ordered = [
        (category.value, str(category.label), groups[category.value])
        for category in WaitCategory
        if groups.get(category.value)
    ]
    return ProjectWorkload(
        project=project,
        use=project_flavor_use(project, at=now),
        pending_by_category=ordered,
        running=running,
    )


def recent_waits(
    *, project_ids: list[int], since: datetime, now: datetime | None = None
) -> dict[int, dict[str, dict[str, int]]]:
    """Per project and category: the jobs submitted since ``since`` that waited for that
    reason, their mean wait in minutes (the job's wait, ``definitions.job_wait``, censored at
    ``now``), how many never started and how many still wait (two queries)."""
    now = now or timezone.now()
    jobs = list(
        WorkloadJob.objects.filter(project_id__in=project_ids, submitted_at__gte=since)
        .exclude(category="")
        .only(*definitions.WAIT_FIELDS)
    )
    starts = definitions.first_starts(jobs)
    totals: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for job in jobs:
        wait = definitions.job_wait(
            job,
            now=now,
            started=starts.get(job.pk) if definitions.needs_events(job) else job.started_at,
        )
        if wait is None or job.project_id is None:
            continue
        total = totals[(job.project_id, job.category)]
        total[0] += 1
        total[1] += wait.seconds
        total[2] += int(wait.never_started)
        total[3] += int(wait.ongoing)
    result: dict[int, dict[str, dict[str, int]]] = defaultdict(dict)
    for (project_id, category), (count, seconds, never, ongoing) in totals.items():
        result[project_id][category] = {
            "jobs": count,
            "mean_minutes": int(seconds / max(count, 1) / 60),
            "never_started": never,
            "still_waiting": ongoing,
        }
    return result


def jobs_status(*, project: Project, job_ids: list[str]) -> list[dict[str, Any]]:
    """For a queue-jump request: each named job's state, and why it waits when it does."""
    found = {
        job.job_id: job  # the latest job of a reused id wins
        for job in WorkloadJob.objects.filter(project=project, job_id__in=job_ids).order_by(
            "submitted_at", "pk"
        )
    }
    result = []
    for job_id in job_ids:
        job = found.get(job_id)
        result.append(
            {
                "job_id": job_id,
                "known": job is not None,
                "state": job.get_state_display() if job else "",
                "pending": bool(job and job.is_pending),
                "category": str(WaitCategory(job.category).label)
                if job and job.category and job.is_pending
                else "",
                "reason": job.reason if job and job.is_pending else "",
            }
        )
    return result


def jobs_by_project(*, project_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Per project: running and waiting jobs and GPUs, and the waiting ones per category
    (one query, for home pages)."""
    rows = (
        WorkloadJob.objects.filter(
            project_id__in=project_ids, state__in=[JobState.RUNNING, JobState.PENDING]
        )
        .values_list("project_id", "state", "category")
        .annotate(
            jobs=Count("pk"),
            running_gpus=definitions.running_gpus_sum(),
            pending_gpus=Sum("gpus", filter=Q(state=JobState.PENDING), default=0.0),
        )
    )
    result: dict[int, dict[str, Any]] = {
        pid: {"running": 0, "running_gpus": 0, "pending": 0, "pending_gpus": 0, "categories": []}
        for pid in project_ids
    }
    categories: dict[int, dict[str, int]] = defaultdict(dict)
    for project_id, state, category, jobs, running_gpus, pending_gpus in rows:
        entry = result[project_id]
        entry["running_gpus"] += running_gpus
        entry["pending_gpus"] += pending_gpus
        if state == JobState.RUNNING:
            entry["running"] += jobs
        else:
            entry["pending"] += jobs
            key = category or WaitCategory.UNCLASSIFIED
            categories[project_id][key] = categories[project_id].get(key, 0) + jobs
    for entry in result.values():  # fractions of a GPU are kept: 3, or 2.5
        for name in ("running_gpus", "pending_gpus"):
            gpus = round(float(entry[name]), 3)
            entry[name] = int(gpus) if gpus.is_integer() else gpus
    for project_id, counts in categories.items():
        result[project_id]["categories"] = [
            (str(c.label), counts[c.value]) for c in WaitCategory if c.value in counts
        ]
    return result
