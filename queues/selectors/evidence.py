"""The approver's workload evidence of a project (``project_workload_summary``), read from the
rollup (``WorkloadWait``, ``WorkloadHour``) rather than from the project's raw jobs.

A busy project submits tens of thousands of jobs a month; reading each of them (and the events
of those preempted) to sum its waits and GPU-hours cost about a second. The rollup keeps one
narrow wait row per job and one row per hour and key, so the summary reads:

- the waits of the jobs the rollup has read as they are now from their ``WorkloadWait`` rows,
  summed in the database (PostgreSQL; other databases sum the rows here), and the waits of
  the jobs it has not (added or changed since its watermark, less its look-back, and the
  project's active jobs, whose category may change without an event) from the jobs
  themselves, as ``queues.selectors.definitions.job_wait`` defines them;
- the GPU-hours of the whole hours before the rollup's watermark (less its look-back) from
  ``WorkloadHour``, and those after it from the jobs that ran then (``usage_over``).

So the figures are those of the raw jobs (``recent_waits``, ``usage_over``), at a cost that
follows the jobs of the last hours, not the month's. The window starts at a whole UTC hour
(the hour rows cannot be cut): the ``days`` before the current hour, and the current hour so
far. Before the rollup's first run everything is read from the jobs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count, Sum
from django.utils import timezone

from governance.models import Project
from queues.models import (
    ACTIVE_STATES,
    JobState,
    RollupState,
    WaitCategory,
    WorkloadHour,
    WorkloadJob,
    WorkloadWait,
)
from queues.models.rollup import ROLLUP_NAME

from . import definitions
from .workload import project_flavor_use, usage_figures, usage_over, usage_seconds

Totals = dict[str, list[int]]  # category -> [jobs, seconds, never started, still waiting]


def rollup_lookback() -> timedelta:
    """How far before its watermark the rollup rereads the jobs changed (late evidence)."""
    return timedelta(hours=getattr(settings, "ARBITER_ROLLUP_LOOKBACK_HOURS", 6))


def rollup_read_until() -> tuple[datetime | None, int]:
    """Up to when the rollup has read the jobs (its watermark less its look-back; none before
    its first run) and the last job id it has read."""
    state = (
        RollupState.objects.filter(name=ROLLUP_NAME).values_list("watermark", "last_job_id").first()
    )
    if state is None or state[0] is None:
        return None, 0
    return state[0] - rollup_lookback(), int(state[1])


def _floor_hour(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _add_wait(totals: Totals, category: str, wait: definitions.JobWait) -> None:
    total = totals.setdefault(category, [0, 0, 0, 0])
    total[0] += 1
    total[1] += wait.seconds
    total[2] += int(wait.never_started)
    total[3] += int(wait.ongoing)


def _row_wait(row: WorkloadWait, now: datetime) -> definitions.JobWait:
    """A wait row's wait censored at ``now``, as ``definitions.job_wait`` gives it for its job."""
    end, stop = row.wait_end, now
    started = row.started
    if end is not None and end > now:
        end, started = None, False  # a start after the moment asked: still waiting then
    elif end is not None and row.censored:
        stop, end = end, None
    elif end is not None:
        stop = end
    return definitions.JobWait(
        start=row.submitted_at,
        end=end,
        seconds=int(max(0.0, (stop - row.submitted_at).total_seconds())),
        started=started,
        never_started=not started and end is not None,
    )


# The same cases as ``_row_wait``, summed per category in one index range scan.
ROW_WAITS_SQL = """
SELECT category, COUNT(*),
       COALESCE(SUM(FLOOR(GREATEST(0, EXTRACT(EPOCH FROM (
           CASE WHEN wait_end IS NULL OR wait_end > %(now)s THEN %(now)s ELSE wait_end END
           - submitted_at))))), 0),
       SUM(CASE WHEN wait_end <= %(now)s AND NOT censored AND NOT started THEN 1 ELSE 0 END),
       SUM(CASE WHEN wait_end IS NULL OR wait_end > %(now)s OR censored THEN 1 ELSE 0 END)
FROM queues_workloadwait
WHERE project_id = %(project)s AND submitted_at >= %(since)s AND submitted_at <= %(now)s
      AND category <> '' AND NOT (job_id = ANY(%(fresh)s))
GROUP BY category
"""


def _rollup_waits(
    *, project: Project, since: datetime, now: datetime, fresh: list[int], totals: Totals
) -> None:
    if connection.vendor == "postgresql":
        params: dict[str, Any] = {"project": project.pk, "since": since, "now": now, "fresh": fresh}
        with connection.cursor() as cursor:
            cursor.execute(ROW_WAITS_SQL, params)
            for category, jobs, seconds, never, ongoing in cursor.fetchall():
                total = totals.setdefault(category, [0, 0, 0, 0])
                for index, value in enumerate((jobs, seconds, never, ongoing)):
                    total[index] += int(value or 0)
        return
    rows = (
        WorkloadWait.objects.filter(project=project, submitted_at__gte=since, submitted_at__lte=now)
        .exclude(category="")
        .exclude(job_id__in=fresh)
    )
    for row in rows.iterator():
        _add_wait(totals, row.category, _row_wait(row, now))


def _fresh_jobs(
    *, project: Project, since: datetime, now: datetime, read_until: datetime | None, last_id: int
) -> list[WorkloadJob]:
    """The project's jobs submitted in the window that the rollup has not read as they are
    now (all of them before its first run), in one query of three index reads."""
    window = (
        WorkloadJob.objects.filter(project=project, submitted_at__gte=since, submitted_at__lte=now)
        .exclude(category="")
        .order_by()
    )
    if read_until is None:
        chosen = window
    else:
        ids = (
            window.filter(pk__gt=last_id)
            .values("pk")
            .union(
                window.filter(last_event_at__gt=read_until).values("pk"),
                window.filter(state__in=ACTIVE_STATES).values("pk"),
            )
        )
        chosen = WorkloadJob.objects.filter(pk__in=ids).order_by()
    return list(chosen.only(*definitions.WAIT_FIELDS))


def waits_from_rollup(
    *,
    project: Project,
    since: datetime,
    now: datetime,
    read: tuple[datetime | None, int] | None = None,
) -> dict[str, dict[str, int]]:
    """Per category: the jobs of ``project`` submitted in [``since``, ``now``] that waited for
    that reason, their mean wait in minutes, how many never started and how many still wait
    (``recent_waits``' figures; see the module's docstring). ``read``: ``rollup_read_until()``
    when the caller has it."""
    read_until, last_id = read or rollup_read_until()
    jobs = _fresh_jobs(
        project=project, since=since, now=now, read_until=read_until, last_id=last_id
    )
    totals: Totals = {}
    starts = definitions.first_starts(jobs)
    for job in jobs:
        started = starts.get(job.pk) if definitions.needs_events(job) else job.started_at
        wait = definitions.job_wait(job, now=now, started=started)
        if wait is not None:
            _add_wait(totals, job.category, wait)
    if read_until is not None:
        fresh = [job.pk for job in jobs]
        _rollup_waits(project=project, since=since, now=now, fresh=fresh, totals=totals)
    return {
        category: {
            "jobs": count,
            "mean_minutes": int(seconds / max(count, 1) / 60),
            "never_started": never,
            "still_waiting": ongoing,
        }
        for category, (count, seconds, never, ongoing) in totals.items()
    }


def usage_from_rollup(
    *,
    project: Project,
    since: datetime,
    until: datetime,
    read: tuple[datetime | None, int] | None = None,
) -> dict[str, float]:
    """``usage_over``'s figures for a window starting at a whole hour: the hours the rollup
    has read from ``WorkloadHour``, the rest from the jobs that ran then. (The hour rows
    hold whole seconds, and replay a preempted job's runs, as the review counts them.)
    ``read``: ``rollup_read_until()`` when the caller has it."""
    read_until, _last = read or rollup_read_until()
    if read_until is None or since != _floor_hour(since):
        return usage_over(project=project, since=since, until=until)
    split = min(max(_floor_hour(read_until), since), until)
    rolled = WorkloadHour.objects.filter(
        project=project, hour__gte=since, hour__lt=split
    ).aggregate(seconds=Sum("gpu_seconds"))["seconds"]
    seconds = (rolled or 0) + usage_seconds(project=project, since=split, until=until)
    return usage_figures(seconds, since=since, until=until)


def project_workload_summary(
    *, project: Project, days: int = 30, at: datetime | None = None
) -> dict[str, Any]:
    """Plain data for the apps that may not import ``queues`` (the ``ARBITER_WORKLOAD_EVIDENCE``
    hook): running and pending GPUs against guarantee and maximum, usage and waits over the
    ``days`` before the hour of ``at`` (now by default) and that hour so far."""
    now = at or timezone.now()
    since = _floor_hour(now) - timedelta(days=days)
    use = project_flavor_use(project, at=now)
    read = rollup_read_until()
    waits = waits_from_rollup(project=project, since=since, now=now, read=read)
    # The pending and running entries of the (project, state) index only, not every job.
    counts: dict[str, int] = dict.fromkeys((JobState.PENDING.value, JobState.RUNNING.value), 0)
    for state, total in (
        WorkloadJob.objects.filter(project=project, state__in=list(counts))
        .order_by()
        .values("state")
        .annotate(total=Count("*"))
        .values_list("state", "total")
    ):
        counts[state] = total
    return {
        "days": days,
        "flavors": [
            {
                "flavor": str(u.flavor) if u.flavor else "",
                "guarantee": u.guarantee,
                "maximum": u.maximum,
                "running": u.running,
                "pending": u.pending,
            }
            for u in use
        ],
        "usage": usage_from_rollup(project=project, since=since, until=now, read=read),
        "waits": [
            {"category": c.value, "label": str(c.label), **waits[c.value]}
            for c in WaitCategory
            if c.value in waits
        ],
        "pending_jobs": counts[JobState.PENDING.value],
        "running_jobs": counts[JobState.RUNNING.value],
    }
