"""Reads of the workload evidence: why one job waits, a project's jobs, usage and waits."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.db import connection
from django.db.models import Count, Q, QuerySet, Sum
from django.http import Http404
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from governance.models import GpuFlavor, PoolCapacity, PriorityTier, Project
from governance.selectors import effective_rules
from queues.models import JobState, WaitCategory, WorkloadJob
from queues.schedulers.classify import slurm_reason_token

from . import definitions, diagnosis

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
    grouped = jobs.values_list("flavor_id", "state", "cluster_id", "pool_id").annotate(
        total=Sum("gpus")
    )
    maps = definitions.pool_maps() if pool_id is not None else None
    rows = []
    for flavor_id, state, cluster_id, pool, total in grouped:
        if maps is not None:
            probe = WorkloadJob(
                project_id=project.pk, flavor_id=flavor_id, cluster_id=cluster_id, pool_id=pool
            )
            if definitions.job_pool_id(job=probe, maps=maps) != pool_id:
                continue
        rows.append((flavor_id, state, total))
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
    rows = (
        WorkloadJob.objects.filter(source=job.source, state=JobState.RUNNING)
        .order_by()
        .values_list("project_id", "tier_id", "user_name", "flavor_id", "cluster_id", "pool_id")
        .annotate(total=Sum("gpus"))
    )
    for project_id, tier_id, user, flavor_id, cluster_id, pool, total in rows:
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


WHY_UNKNOWN = {
    "per_job_room": gettext_lazy("the job asks for no more than its tier's per-job maximum"),
    "tier_room": gettext_lazy("the tier's running GPUs leave room for the job under its cap"),
    "keys_unknown": gettext_lazy("the job's project, pool or flavor is not known"),
    "quota_room": gettext_lazy(
        "the project's running GPUs leave room for the job under its maximum"
    ),
    "no_capacity": gettext_lazy("no capacity of the job's flavor is declared for its pool"),
    "capacity_free": gettext_lazy(
        "the declared capacity has enough free GPUs for the job (the GPUs may be on nodes "
        "that are down or reserved, or used by jobs Arbiter does not see)"
    ),
    "none_ahead": gettext_lazy(
        "no job that could start ranks ahead of it for the same flavor and pool"
    ),
    "reason_unknown": gettext_lazy("the scheduler's reason is not one Arbiter knows"),
}
FIGURE_NAMES = {
    "used": gettext_lazy("in use"),
    "limit": gettext_lazy("limit"),
    "asked": gettext_lazy("asked"),
    "capacity": gettext_lazy("capacity"),
    "running": gettext_lazy("running"),
    "free": gettext_lazy("free"),
    "ahead": gettext_lazy("jobs ahead"),
    "ahead_gpus": gettext_lazy("GPUs ahead"),
    "share": gettext_lazy("its QOS's share of the cap"),
    "share_used": gettext_lazy("in use in its QOS"),
    "jobs": gettext_lazy("jobs counted"),
}
UNKNOWN_LABEL = gettext_lazy("Unknown")
UNKNOWN_TEXT = gettext_lazy(
    "The figures Arbiter reads do not support any reason: the scheduler's raw reason is shown."
)


def gpus_text(value: float) -> str:
    """A GPU count as people write it: 3, or 0.25 for a fraction."""
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}".rstrip("0")


@dataclass
class WaitExplanation:
    job: WorkloadJob
    category: str  # a WaitCategory value, "unknown", or empty when the job is not pending
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
    ahead: list[dict[str, Any]] = field(default_factory=list)
    ahead_count: int = 0
    limit: str = ""
    figures: dict[str, str] = field(default_factory=dict)
    holders: list[dict[str, Any]] = field(default_factory=list)
    diagnosis: diagnosis.Diagnosis | None = None

    @property
    def waited_minutes(self) -> int:
        return self.waited_seconds // 60

    @property
    def current_wait_minutes(self) -> int | None:
        return None if self.current_wait_seconds is None else self.current_wait_seconds // 60

    @property
    def figure_rows(self) -> list[tuple[str, str]]:
        return [(str(FIGURE_NAMES.get(k, k)), v) for k, v in self.figures.items()]


def next_step(
    job: WorkloadJob, found: diagnosis.Diagnosis, *, tier_name: str = ""
) -> tuple[str, str, str]:
    """The plain-words next step, from the figures of the diagnosis, and an action link only
    where it would help."""
    # one piece: one branch per diagnosis.Limit, in the order of that vocabulary, so that the
    # next steps read as one table of sentences over the same figures ``f``.
    if not job.is_pending:
        return (
            _("The job is not waiting (it is %(state)s).") % {"state": job.get_state_display()},
            "",
            "",
        )
    f = {key: gpus_text(value) for key, value in found.figures.items()}
    used, limit, asked = (found.figures.get(k, 0.0) for k in ("used", "limit", "asked"))
    f["needed"] = gpus_text(max(0.0, used + asked - limit))
    f["flavor"] = job.flavor.name if job.flavor else ""
    f["tier"] = tier_name
    f["reason"] = found.reason or job.reason
    Limit = diagnosis.Limit
    if not found.known:
        figures = ", ".join(f"{FIGURE_NAMES.get(k, k)} {f[k]}" for k in found.figures)
        return (
            _(
                "Arbiter cannot tell why it waits: the scheduler says “%(reason)s”, but "
                "%(why)s%(figures)s. Ask ops."
            )
            % {
                "reason": f["reason"] or "—",
                "why": WHY_UNKNOWN.get(found.why_unknown, found.why_unknown),
                "figures": f" ({figures})" if figures else "",
            },
            "",
            "",
        )
    f.update(found.details)
    if found.limit == Limit.PROJECT_QUOTA and found.details.get("exclusive"):
        return (
            _(
                "The job asks for --exclusive: Slurm gives it every GPU of the node, %(type)s "
                "GPUs included, and your project may hold at most %(limit)s of those. It can "
                "never start as it is: submit %(submit)s instead."
            )
            % f,
            "",
            "",
        )
    if found.limit == Limit.PROJECT_QUOTA and found.can_never_start and "submit" in f:
        return (
            _(
                "Your project may hold at most %(limit)s %(type)s GPUs (Slurm's limit on its "
                "account) and the job asks for %(asked)s: it can never start as it is. Submit "
                "%(submit)s instead, or request a quota exception."
            )
            % f,
            quota_request_url(job),
            _("Request a quota exception"),
        )
    if found.limit == Limit.PROJECT_QUOTA:
        if found.figures.get("limit") == 0:
            text = _(
                "Your project has no %(flavor)s quota in the job's pool (maximum 0): the job can "
                "never start as it is. Request a quota exception, or ask for a flavor the "
                "project has."
            )
        elif found.can_never_start:
            text = _(
                "The job asks for %(asked)s %(flavor)s GPUs, more than your project's maximum "
                "of %(limit)s in its pool: make it smaller, or request a quota exception."
            )
        else:
            text = _(
                "Your project uses %(used)s of %(limit)s %(flavor)s GPUs in the job's pool and "
                "the job asks for %(asked)s: it starts when %(needed)s of them are released — "
                "or request a quota exception."
            )
        return text % f, quota_request_url(job), _("Request a quota exception")
    if found.limit == Limit.TIER_CAP and found.details.get("share_moves"):
        return (
            _(
                "Tier %(tier)s's cap of %(limit)s GPUs is split over its QOS (%(qos)s); the "
                "tier uses %(used)s, so there is room for the %(asked)s GPUs this job asks for, "
                "but its QOS's share (%(share)s, %(share_used)s in use) is full. Arbiter moves "
                "free cap to where jobs wait within a minute; then it starts."
            )
            % f,
            "",
            "",
        )
    if found.limit == Limit.TIER_CAP:
        if found.can_never_start:
            text = _(
                "The job asks for %(asked)s GPUs, more than tier %(tier)s's cap of %(limit)s "
                "across all projects: make it smaller."
            )
        else:
            text = _(
                "Tier %(tier)s is capped at %(limit)s GPUs across all projects; its jobs use "
                "%(used)s and this one asks for %(asked)s: it starts when %(needed)s are "
                "released. A quota exception for your project does not lift the tier's cap."
            )
        return text % f, "", ""
    if found.limit == Limit.USER_CAP:
        return (
            _(
                "A per-user limit set by hand on the QOS holds it (%(reason)s); your jobs in the "
                "tier use %(used)s GPUs and this one asks for %(asked)s. Arbiter compiles no "
                "per-user limit, so a quota exception would not help: ask ops to change it."
            )
            % f,
            "",
            "",
        )
    if found.limit == Limit.PER_JOB and "submit" in f:
        return (
            _(
                "The job asks for %(asked)s GPUs; QOS %(qos)s allows %(limit)s per job (as "
                "Slurm holds it): it can never start as it is. Submit %(submit)s instead, or "
                "use a tier that allows more GPUs per job."
            )
            % f,
            "",
            "",
        )
    if found.limit == Limit.PER_JOB:
        return (
            _(
                "The job asks for %(asked)s GPUs; its tier allows %(limit)s per job: it cannot "
                "start as it is — make it smaller."
            )
            % f,
            "",
            "",
        )
    if found.limit == Limit.ASSOCIATION and "setting" in f:
        return (
            _(
                "A limit set by hand holds it: %(setting)s, %(jobs)s counted against it "
                "(%(reason)s). Arbiter compiles no such limit, so a quota exception would not "
                "help: ask ops to remove it."
            )
            % f,
            "",
            "",
        )
    if found.limit == Limit.ASSOCIATION:
        return (
            _(
                "A job-count limit set by hand on the account or user holds it (%(reason)s). "
                "Arbiter compiles no such limit, so a quota exception would not help: ask ops "
                "to change it."
            )
            % f,
            "",
            "",
        )
    if found.limit == Limit.POOL_CAPACITY:
        if found.can_never_start:
            text = _(
                "The job asks for %(asked)s %(flavor)s GPUs, more than the %(capacity)s its "
                "pool has: make it smaller."
            )
        elif found.live:
            text = _(
                "Slurm's nodes that can run jobs have %(capacity)s %(flavor)s GPUs; "
                "%(running)s are allocated, %(free)s are free and the job asks for %(asked)s: "
                "it starts when GPUs are released. Raising its priority does not add GPUs."
            )
        else:
            text = _(
                "The job's pool has %(capacity)s %(flavor)s GPUs (declared); %(running)s run "
                "there now, %(free)s are free and the job asks for %(asked)s: it starts when "
                "GPUs are released. Raising its priority does not add GPUs."
            )
        if "mismatch" in f:
            text += " " + _(
                "Arbiter's rules declare %(mismatch)s of them for the pool: Slurm and the "
                "declared capacity differ; ops should correct one of them."
            )
        return text % f, "", ""
    if found.limit == Limit.JOBS_AHEAD:
        text = _(
            "%(ahead)s jobs that compete for the same GPUs and could start rank ahead of it "
            "(%(ahead_gpus)s GPUs); it starts after them. If the work is urgent, request a "
            "queue jump for this job."
        )
        if "never" in f:
            text += " " + _("%(never)s more jobs of higher priority can never start: not counted.")
        return (
            text % f,
            queue_jump_url(job),
            _("Request a queue jump"),
        )
    if found.limit == Limit.HOLD:
        return (
            _("The job is held (%(reason)s): release it, or ask ops why it is held.") % f,
            "",
            "",
        )
    if found.limit == Limit.BEGIN_TIME:
        return (
            _("It may not start before its begin time (%(reason)s); then it starts by itself.") % f,
            "",
            "",
        )
    if found.limit == Limit.DEPENDENCY:
        if found.can_never_start:
            return (
                _("Its dependency can never be satisfied: cancel it and submit it again."),
                "",
                "",
            )
        if f.get("waits_on"):
            return (
                _(
                    "It starts when the jobs it depends on (%(dependency)s: %(waits_on)s) have "
                    "finished as required."
                )
                % f,
                "",
                "",
            )
        return _("It starts when the jobs it depends on have finished as required."), "", ""
    if found.limit == Limit.CONSTRAINT:
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
            % f,
            "",
            "",
        )
    return (
        _("A queue rule holds it (%(reason)s): check its queue, QOS and account, or ask ops.") % f,
        "",
        "",
    )


def job_wait_explanation(
    job: WorkloadJob, *, now: datetime | None = None, live: Any = None
) -> WaitExplanation:
    """Why the job waits, with the figures that make the answer true (from its own source;
    for a pending Slurm job, ``live``: what the cluster holds now, ``services.job_live_wait``)."""
    now = now or timezone.now()
    pool_id = definitions.job_pool_id(job=job, maps=definitions.pool_maps())
    use = (
        project_flavor_use(job.project, at=now, source=job.source, pool_id=pool_id)
        if job.project is not None
        else []
    )
    found = job_diagnosis(job, now=now, live=live) if job.is_pending else None
    tiers = {
        pk: (slug, name)
        for pk, slug, name in PriorityTier.objects.values_list("pk", "slug", "name")
    }
    projects: dict[int | None, str] = {}
    if found is not None:
        projects = dict(
            Project.objects.filter(pk__in=[k for k in found.holders if k is not None])
            .values_list("pk", "name")
            .order_by()
        )
    if found is not None:
        text, url, label = next_step(job, found, tier_name=tiers.get(job.tier_id or 0, ("", ""))[1])
    else:
        text, url, label = next_step(job, diagnosis.Diagnosis("", "", job.reason))
    category = (found.category if found else "") if job.is_pending else ""
    wait = definitions.job_wait(job, now=now)
    if category == diagnosis.UNKNOWN:
        label_text, category_text = str(UNKNOWN_LABEL), str(UNKNOWN_TEXT)
    elif category:
        label_text = str(WaitCategory(category).label)
        category_text = str(CATEGORY_TEXT.get(WaitCategory(category), ""))
    else:
        label_text = category_text = ""
    return WaitExplanation(
        job=job,
        category=category,
        category_label=label_text,
        category_text=category_text,
        clears_by_itself=found.clears_by_itself if found else None,
        waited_seconds=wait.seconds if wait is not None else 0,
        current_wait_seconds=definitions.current_wait_seconds(job, now=now),
        never_started=bool(wait and wait.never_started),
        next_step=text,
        action_url=url,
        action_label=label,
        use=use,
        ahead=[
            {
                "job_id": other.job_id,
                "tier": tiers.get(other.tier or 0, ("", ""))[0],
                "tier_name": tiers.get(other.tier or 0, ("", ""))[1],
                "gpus": gpus_text(other.gpus),
            }
            for other in (found.ahead if found else [])
        ],
        ahead_count=found.ahead_count if found else 0,
        limit=found.limit if found else "",
        figures={k: gpus_text(v) for k, v in found.figures.items()} if found else {},
        holders=[
            {"project": projects.get(k, "—") if k is not None else "—", "gpus": gpus_text(v)}
            for k, v in (found.holders.items() if found else [])
        ],
        diagnosis=found,
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
    for entry in result.values():  # fractions of a GPU are kept: 3, or 2.5
        for name in ("running_gpus", "pending_gpus"):
            gpus = round(float(entry[name]), 3)
            entry[name] = int(gpus) if gpus.is_integer() else gpus
    for project_id, counts in categories.items():
        result[project_id]["categories"] = [
            (str(c.label), counts[c.value]) for c in WaitCategory if c.value in counts
        ]
    return result
