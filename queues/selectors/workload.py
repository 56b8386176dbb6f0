"""Reads of the workload evidence: why one job waits, a project's jobs, usage and waits."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.db import connection
from django.db.models import Count, Q, QuerySet, Sum
from django.http import Http404
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from governance.models import GpuFlavor, PoolCapacity, Project
from governance.selectors import effective_rules
from queues.models import JobState, WaitCategory, WorkloadJob

from . import definitions

CATEGORY_TEXT = {
    WaitCategory.RESOURCE: gettext_lazy(
        "The pool has no free GPUs of the kind the job asks for; it starts when some free up."
    ),
    WaitCategory.QUOTA: gettext_lazy(
        "The project (or user, or queue) is at its limit, even if GPUs may be idle."
    ),
    WaitCategory.QUEUE_RULE: gettext_lazy(
        "A queue rule holds it: ordering, priority, a hold, or the queue's configuration."
    ),
    WaitCategory.DEPENDENCY: gettext_lazy("It waits for another job (or data) to finish first."),
    WaitCategory.PLACEMENT: gettext_lazy(
        "No node fits what it asks for: node labels, constraints, taints, or a runtime problem."
    ),
    WaitCategory.UNCLASSIFIED: gettext_lazy(
        "The scheduler gave a reason Arbiter does not know yet; it is kept and counted."
    ),
}
HELD = {"JobHeldAdmin", "JobHeldUser", "JobHoldMaxRequeue"}
NEVER = {"BadConstraints", "DependencyNeverSatisfied"}


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


def waited_seconds(job: WorkloadJob, now: datetime) -> int:
    """The job's wait so far (its first wait, ``definitions.job_wait``; 0 without a submit
    time)."""
    wait = definitions.job_wait(job, now=now)
    return wait.seconds if wait is not None else 0


@dataclass
class FlavorUse:
    flavor: GpuFlavor | None
    guarantee: int = 0
    maximum: int | None = 0
    running: int = 0
    pending: int = 0

    @property
    def at_limit(self) -> bool:
        return self.maximum is not None and self.running >= self.maximum


def project_flavor_use(project: Project, *, at: datetime) -> list[FlavorUse]:
    """The project's effective guarantee and maximum per flavor (over pools), against the GPUs
    its jobs run and ask for now (effective rules: four queries; usage: one)."""
    rules = effective_rules(at=at, project_slugs=[project.slug]).projects.get(project.slug)
    uses: dict[int | None, FlavorUse] = {}
    for quota in rules.quotas if rules else ():
        use = uses.setdefault(quota.quota.flavor.pk, FlavorUse(flavor=quota.quota.flavor))
        use.guarantee += quota.guarantee
        top = quota.maximum
        use.maximum = None if top is None or use.maximum is None else use.maximum + top
    rows = (
        WorkloadJob.objects.filter(project=project, state__in=[JobState.RUNNING, JobState.PENDING])
        .values_list("flavor_id", "state")
        .annotate(total=Sum("gpus"))
    )
    flavors = {use.flavor.pk: use.flavor for use in uses.values() if use.flavor}
    for flavor_id, state, total in rows:
        if flavor_id not in uses:
            flavor: GpuFlavor | None = flavors.get(flavor_id) or (
                GpuFlavor.objects.filter(pk=flavor_id).first() if flavor_id else None
            )
            uses[flavor_id] = FlavorUse(flavor=flavor, maximum=None)
        if state == JobState.RUNNING:
            uses[flavor_id].running += total or 0
        else:
            uses[flavor_id].pending += total or 0
    return sorted(uses.values(), key=lambda use: use.flavor.name if use.flavor else "")


def pool_free(job: WorkloadJob) -> list[dict[str, Any]]:
    """Per flavor of the job's cluster pools: capacity, GPUs running there, and free."""
    if job.cluster_id is None:
        return []
    capacities = (
        PoolCapacity.objects.filter(pool__clusters=job.cluster_id)
        .values("flavor_id", "flavor__name")
        .annotate(total=Sum("gpus"))
    )
    running = dict(
        WorkloadJob.objects.filter(source=job.source, state=JobState.RUNNING)
        .values_list("flavor_id")
        .annotate(total=Sum("gpus"))
    )
    return [
        {
            "flavor": row["flavor__name"],
            "capacity": row["total"],
            "running": running.get(row["flavor_id"], 0),
            "free": max(0, row["total"] - running.get(row["flavor_id"], 0)),
        }
        for row in capacities.order_by("flavor__name")
    ]


def jobs_ahead(job: WorkloadJob) -> list[WorkloadJob]:
    """Pending jobs of higher tiers on the same cluster (the ones the scheduler runs first)."""
    if job.tier is None or not job.is_pending:
        return []
    return list(
        WorkloadJob.objects.filter(
            source=job.source, state=JobState.PENDING, tier__score__gt=job.tier.score
        )
        .select_related("tier", "project")
        .order_by("-tier__score", "submitted_at")[:20]
    )


def quota_request_url(job: WorkloadJob) -> str:
    query = {"kind": "quota_exception"}
    if job.project is not None:
        query["project"] = job.project.slug
    return f"{reverse('request_create')}?{urlencode(query)}"


def queue_jump_url(job: WorkloadJob) -> str:
    query = {"kind": "queue_jump", "jobs": job.job_id}
    if job.project is not None:
        query["project"] = job.project.slug
    return f"{reverse('request_create')}?{urlencode(query)}"


@dataclass
class WaitExplanation:
    job: WorkloadJob
    category: str
    category_label: str
    category_text: str
    clears_by_itself: bool | None
    waited_seconds: int  # the job's wait (docs/definitions.md)
    current_wait_seconds: int | None  # since it last became pending; None unless pending
    never_started: bool
    next_step: str
    action_url: str = ""
    action_label: str = ""
    use: list[FlavorUse] = field(default_factory=list)
    ahead: list[WorkloadJob] = field(default_factory=list)
    pool: list[dict[str, Any]] = field(default_factory=list)

    @property
    def waited_minutes(self) -> int:
        return self.waited_seconds // 60

    @property
    def current_wait_minutes(self) -> int | None:
        return None if self.current_wait_seconds is None else self.current_wait_seconds // 60


def next_step(
    job: WorkloadJob, use: list[FlavorUse], ahead: list[WorkloadJob], pool: list[dict[str, Any]]
) -> tuple[str, str, str]:
    """The plain-words next step for the job's category, and an action link when one helps."""
    category = job.category
    if not job.is_pending:
        return (
            _("The job is not waiting (it is %(state)s).") % {"state": job.get_state_display()},
            "",
            "",
        )
    if category == WaitCategory.QUOTA:
        mine = next((u for u in use if u.flavor and u.flavor.pk == job.flavor_id), None)
        mine = mine or next((u for u in use if u.maximum is not None), None)
        if mine is not None and mine.maximum is not None:
            text = _(
                "Your project uses %(used)d of %(limit)d %(flavor)s GPUs — wait for its jobs to "
                "finish, or request a quota exception."
            ) % {"used": mine.running, "limit": mine.maximum, "flavor": mine.flavor or ""}
        elif job.clears_by_itself is False:
            text = _(
                "The job asks for more than one job may have (%(reason)s): make it smaller, or "
                "request a quota exception."
            ) % {"reason": job.reason}
        else:
            text = _("A limit holds it (%(reason)s) — wait, or request a quota exception.") % {
                "reason": job.reason
            }
        return text, quota_request_url(job), _("Request a quota exception")
    if category == WaitCategory.RESOURCE:
        free = next((p for p in pool if job.flavor and p["flavor"] == job.flavor.name), None)
        if free is not None:
            return (
                _(
                    "The pool has %(free)d free %(flavor)s GPUs and the job asks for %(gpus)d: it "
                    "starts when GPUs free up. Raising its priority does not add GPUs."
                )
                % {"free": free["free"], "flavor": free["flavor"], "gpus": job.gpus},
                "",
                "",
            )
        return _("It starts when GPUs free up. Raising its priority does not add GPUs."), "", ""
    if category == WaitCategory.QUEUE_RULE:
        if job.reason in HELD:
            return (
                _("The job is held (%(reason)s): release it, or ask ops why it is held.")
                % {"reason": job.reason},
                "",
                "",
            )
        if job.reason == "Priority" or ahead:
            return (
                _(
                    "%(count)d jobs of higher tiers are ahead of it; it starts after them. If the "
                    "work is urgent, request a queue jump for this job."
                )
                % {"count": len(ahead)},
                queue_jump_url(job),
                _("Request a queue jump"),
            )
        return (
            _("A queue rule holds it (%(reason)s): check its queue, QOS and account, or ask ops.")
            % {"reason": job.reason},
            "",
            "",
        )
    if category == WaitCategory.DEPENDENCY:
        if job.reason in NEVER:
            return (
                _("Its dependency can never be satisfied: cancel it and submit it again."),
                "",
                "",
            )
        return _("It starts when the jobs it depends on have finished as required."), "", ""
    if category == WaitCategory.PLACEMENT:
        if job.constraints:
            return (
                _("The constraint “%(constraint)s” matches no node: change the request.")
                % {"constraint": job.constraints},
                "",
                "",
            )
        return (
            _(
                "No node fits the job now (%(reason)s): check its request, or ask ops about "
                "the nodes."
            )
            % {"reason": job.reason},
            "",
            "",
        )
    return (
        _("Arbiter does not know the reason “%(reason)s”: ask ops.") % {"reason": job.reason},
        "",
        "",
    )


def job_wait_explanation(job: WorkloadJob, *, now: datetime | None = None) -> WaitExplanation:
    now = now or timezone.now()
    use = project_flavor_use(job.project, at=now) if job.project is not None else []
    ahead = jobs_ahead(job)
    pool = pool_free(job)
    text, url, label = next_step(job, use, ahead, pool)
    category = job.category if job.is_pending else ""
    wait = definitions.job_wait(job, now=now)
    return WaitExplanation(
        job=job,
        category=category,
        category_label=str(WaitCategory(category).label) if category else "",
        category_text=str(CATEGORY_TEXT.get(WaitCategory(category), "")) if category else "",
        clears_by_itself=job.clears_by_itself if job.is_pending else None,
        waited_seconds=wait.seconds if wait is not None else 0,
        current_wait_seconds=definitions.current_wait_seconds(job, now=now),
        never_started=bool(wait and wait.never_started),
        next_step=text,
        action_url=url,
        action_label=label,
        use=use,
        ahead=ahead,
        pool=pool,
    )


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
        .only(
            "project_id",
            "category",
            "state",
            "submitted_at",
            "started_at",
            "ended_at",
            "preemptions",
            "requeues",
        )
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


def usage_over(*, project: Project, since: datetime, until: datetime) -> dict[str, float]:
    """GPU-hours the project's jobs ran between ``since`` and ``until`` and the mean GPUs in use
    (summed in the database on PostgreSQL: a month of a large pool is ~10^5 jobs)."""
    seconds = 0.0
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(USAGE_SQL, {"project": project.pk, "since": since, "until": until})
            seconds = float(cursor.fetchone()[0])
    else:
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
    span = max((until - since).total_seconds(), 1)
    return {"gpu_hours": round(seconds / 3600, 1), "mean_gpus": round(seconds / span, 2)}


def project_workload_summary(
    *, project: Project, days: int = 30, at: datetime | None = None
) -> dict[str, Any]:
    """Plain data for the apps that may not import ``queues`` (the ``ARBITER_WORKLOAD_EVIDENCE``
    hook): running and pending GPUs against guarantee and maximum, usage and waits over the
    ``days`` before ``at`` (now by default)."""
    now = at or timezone.now()
    since = now - timedelta(days=days)
    use = project_flavor_use(project, at=now)
    waits = recent_waits(project_ids=[project.pk], since=since, now=now).get(project.pk, {})
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
        "usage": usage_over(project=project, since=since, until=now),
        "waits": [
            {"category": c.value, "label": str(c.label), **waits[c.value]}
            for c in WaitCategory
            if c.value in waits
        ],
        "pending_jobs": WorkloadJob.objects.filter(project=project, state=JobState.PENDING).count(),
        "running_jobs": WorkloadJob.objects.filter(project=project, state=JobState.RUNNING).count(),
    }


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
        .annotate(jobs=Count("pk"), gpus=Sum("gpus"))
    )
    result: dict[int, dict[str, Any]] = {
        pid: {"running": 0, "running_gpus": 0, "pending": 0, "pending_gpus": 0, "categories": []}
        for pid in project_ids
    }
    categories: dict[int, dict[str, int]] = defaultdict(dict)
    for project_id, state, category, jobs, gpus in rows:
        entry = result[project_id]
        if state == JobState.RUNNING:
            entry["running"] += jobs
            entry["running_gpus"] += gpus or 0
        else:
            entry["pending"] += jobs
            entry["pending_gpus"] += gpus or 0
            key = category or WaitCategory.UNCLASSIFIED
            categories[project_id][key] = categories[project_id].get(key, 0) + jobs
    for project_id, counts in categories.items():
        result[project_id]["categories"] = [
            (str(c.label), counts[c.value]) for c in WaitCategory if c.value in counts
        ]
    return result
