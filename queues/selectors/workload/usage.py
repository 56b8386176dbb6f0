"""GPU usage over a window: GPU-seconds per project and flavor, and the figures of a review."""

from __future__ import annotations

from datetime import datetime

from django.db import connection
from django.db.models import Q

from governance.models import Project
from queues.models import WorkloadJob

# Two index-only range scans of ``job_project_ended_use`` (an ``OR`` of the two conditions
# would read every job of the project from the table).
USAGE_SQL = """
SELECT COALESCE(SUM(gpus * GREATEST(0, EXTRACT(EPOCH FROM
    LEAST(COALESCE(ended_at, %(until)s), %(until)s) - GREATEST(started_at, %(since)s)))), 0)
FROM (
    SELECT gpus, started_at, ended_at FROM queues_workloadjob
    WHERE project_id = %(project)s AND ended_at > %(since)s AND started_at < %(until)s
    UNION ALL
    SELECT gpus, started_at, ended_at FROM queues_workloadjob
    WHERE project_id = %(project)s AND ended_at IS NULL AND started_at < %(until)s
) AS overlapping
"""


def usage_seconds(*, project: Project, since: datetime, until: datetime) -> float:
    """GPU-seconds the project's jobs ran between ``since`` and ``until`` (summed in the
    database on PostgreSQL: a month of a large pool is ~10^5 jobs)."""
    seconds = 0.0
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(USAGE_SQL, {"project": project.pk, "since": since, "until": until})
            return float(cursor.fetchone()[0])
    jobs = (
        WorkloadJob.objects.filter(project=project, started_at__lt=until)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since))
        .values_list("gpus", "started_at", "ended_at")
    )
    for gpus, started, ended in jobs.iterator():
        if started is None:
            continue
        start = max(started, since)
        end = min(ended or until, until)
        if end > start:
            seconds += gpus * (end - start).total_seconds()
    return seconds


def usage_figures(seconds: float, *, since: datetime, until: datetime) -> dict[str, float]:
    """GPU-seconds over [``since``, ``until``) as GPU-hours and the mean GPUs in use."""
    span = max((until - since).total_seconds(), 1)
    return {"gpu_hours": round(seconds / 3600, 1), "mean_gpus": round(seconds / span, 2)}


def usage_over(*, project: Project, since: datetime, until: datetime) -> dict[str, float]:
    """GPU-hours the project's jobs ran between ``since`` and ``until`` and the mean GPUs in
    use, from the jobs (``queues.selectors.evidence`` reads the rollup's hours)."""
    seconds = usage_seconds(project=project, since=since, until=until)
    return usage_figures(seconds, since=since, until=until)
