"""Why one job waits, in words: its wait's category, the figures, and the next step to take."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from governance.models import PriorityTier, Project
from queues.models import WaitCategory, WorkloadJob

from .. import definitions, diagnosis
from .queue import FlavorUse, job_diagnosis, project_flavor_use

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


def waited_seconds(job: WorkloadJob, now: datetime) -> int:
    """The job's wait so far (its first wait, ``definitions.job_wait``; 0 without a submit
    time)."""
    wait = definitions.job_wait(job, now=now)
    return wait.seconds if wait is not None else 0


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
