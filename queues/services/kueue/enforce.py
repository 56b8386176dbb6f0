"""Arbiter's enforcer on Kueue: the rules Kueue cannot hold, held by Arbiter on the Workloads.

Kueue orders and preempts by a Workload's ``spec.priority`` (a number its webhook lets change
at any time; Kueue acts on a change within seconds) and admits only a Workload whose
``spec.active`` is true (false evicts it, reason Deactivated, and keeps it pending). Every
``ARBITER_KUEUE_ENFORCE_SECONDS`` (beat) the enforcer reads the Workloads of the namespaces
Arbiter governs and patches those two fields, with the field manager ``arbiter-enforcer``
and an annotation that says why:

* **aging**: a pending Workload of a tier with aging is raised by the tier's step for every
  ``aging_after_minutes`` it has waited, never above its cap tier's value (score points are
  turned into scheduler values along the line from the tier to its cap);
* **a cautious class's minimum runtime**: admitted work of the class runs above every tier
  (the top tier's value + 1) until it has run its minimum, so that no preemption by priority
  picks it; then it goes back to its tier;
* **a class's daily maximum of preemptions**: once the class's Workloads were preempted that
  often today (Kueue's own count, ``status.schedulingStats.evictions``, taken per day), its
  admitted work runs above every tier until the day ends;
* **a tier's GPU caps**: a Workload asking more than the tier's per-job cap, and the pending
  (or newest admitted) Workloads past the tier's total across projects, are held
  (``spec.active: false``); the enforcer lets them go, oldest first, when they fit;
* **the end of a grant**: work admitted at a tier the project may no longer use keeps its
  priority, is lowered to the project's own tier, or below every tier, as the tier's
  ``after_grant`` says.

What priority cannot do: a reclaim of a lent guarantee (``reclaimWithinCohort: Any``) takes
the borrower whatever its priority, at once, so a minimum runtime and the reclaim grace do
not hold against a reclaim (see ``kueue.enforcement``). Kueue's WorkloadPriorityClass
controller sets ``spec.priority`` back to the class value when a class changes (or Kueue
restarts): the next pass raises it again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from governance.models import GrantEnd, PreemptionKind, PriorityTier
from governance.selectors import EffectiveProject, EffectiveQuota, EffectiveRules, effective_rules
from queues.models import Cluster, ClusterBackend, ClusterSyncState
from queues.schedulers.backends import SchedulerError
from queues.schedulers.kueue.desired import cluster_queue_name, namespace_for
from queues.schedulers.kueue.values import k8s_name

from .client import KubeClient, KueueConnection

GPU = "nvidia.com/gpu"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/workloads"
FIELD_MANAGER = "arbiter-enforcer"
WHY = "arbiter.governance/enforced"  # why the priority is what it is (a sentence)
HELD = "arbiter.governance/held"  # why Arbiter holds the Workload (spec.active false)
LOG_SIZE = 50  # the last changes kept on the cluster's state


@dataclass(frozen=True)
class Seen:
    """One Workload, as the enforcer reads it."""

    namespace: str
    name: str
    uid: str
    created: datetime
    tier: str  # the WorkloadPriorityClass name ("" when none)
    priority: int | None
    active: bool
    admitted_at: datetime | None  # when Kueue admitted it (None: pending)
    cluster_queue: str
    flavor: str
    gpus: int
    preemptions: int  # Kueue's count of its evictions by preemption
    held: str  # Arbiter's hold annotation
    why: str  # Arbiter's priority annotation

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Decision:
    """What one Workload should be: its priority and whether Kueue may admit it, and why."""

    priority: int | None = None
    why: str = ""
    active: bool = True
    held: str = ""


@dataclass
class Patch:
    key: str
    body: dict[str, Any]
    what: str  # a short sentence for the run's record


@dataclass
class Plan:
    patches: list[Patch] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # preemptions today per class slug


def _time(value: Any) -> datetime | None:
    parsed = parse_datetime(str(value)) if value else None
    return parsed


def seen(item: dict[str, Any]) -> Seen:
    """Read one Workload of the API server."""
    meta = item.get("metadata") or {}
    spec = item.get("spec") or {}
    status = item.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    admitted = conditions.get("Admitted", {})
    admission = status.get("admission") or {}
    flavor = ""
    for assignment in admission.get("podSetAssignments") or []:
        flavor = flavor or str((assignment.get("flavors") or {}).get(GPU, ""))
    gpus = 0
    for podset in spec.get("podSets") or []:
        count = int(podset.get("count") or 1)
        for container in ((podset.get("template") or {}).get("spec") or {}).get("containers") or []:
            resources = container.get("resources") or {}
            asked = (resources.get("requests") or {}).get(GPU) or (
                resources.get("limits") or {}
            ).get(GPU)
            gpus += count * int(str(asked or 0))
    evictions = (status.get("schedulingStats") or {}).get("evictions") or []
    annotations = meta.get("annotations") or {}
    priority = spec.get("priority")
    return Seen(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        created=_time(meta.get("creationTimestamp")) or timezone.now(),
        tier=str((spec.get("priorityClassRef") or {}).get("name", "")),
        priority=None if priority is None else int(priority),
        active=spec.get("active", True) is not False,
        admitted_at=(
            _time(admitted.get("lastTransitionTime")) if admitted.get("status") == "True" else None
        ),
        cluster_queue=str(admission.get("clusterQueue", "")),
        flavor=flavor,
        gpus=gpus,
        preemptions=sum(
            int(e.get("count") or 0) for e in evictions if e.get("reason") == "Preempted"
        ),
        held=str(annotations.get(HELD, "")),
        why=str(annotations.get(WHY, "")),
    )


@dataclass(frozen=True)
class Context:
    """The rules as the enforcer needs them, for one cluster at one moment."""

    at: datetime
    rules: EffectiveRules
    projects: dict[str, EffectiveProject]  # by namespace
    tiers: dict[str, PriorityTier]  # by WorkloadPriorityClass name
    queues: dict[tuple[str, str], EffectiveQuota]  # (cluster queue, flavor) -> quota
    protect: int  # above every tier

    @classmethod
    def build(
        cls, *, rules: EffectiveRules, pools: list[Any], template: str, at: datetime
    ) -> Context:
        projects: dict[str, EffectiveProject] = {}
        queues: dict[tuple[str, str], EffectiveQuota] = {}
        for slug, project in rules.projects.items():
            for pool in pools:
                projects[namespace_for(template, project=slug, pool=pool.slug)] = project
            for quota in project.quotas:
                pool_slug = next((p.slug for p in pools if p.pk == quota.quota.pool_id), None)
                if pool_slug is None:
                    continue
                queue = cluster_queue_name(slug, pool_slug)
                queues[(queue, k8s_name(quota.quota.flavor.slug))] = quota
                queues.setdefault((queue, ""), quota)
        tiers = {k8s_name(tier.slug): tier for tier in rules.tiers}
        top = max((tier.scheduler_value for tier in rules.tiers), default=0)
        return cls(at, rules, projects, tiers, queues, top + 1)

    def quota(self, workload: Seen) -> EffectiveQuota | None:
        return self.queues.get((workload.cluster_queue, workload.flavor)) or self.queues.get(
            (workload.cluster_queue, "")
        )


def aged(tier: PriorityTier, *, base: int, waited: timedelta) -> tuple[int, int]:
    """The priority aging gives a Workload of ``tier`` that waited ``waited`` (never above its
    cap's value), and the steps taken."""
    cap = tier.aging_cap
    if not tier.aging_after_minutes or not tier.aging_step or cap is None:
        return base, 0
    steps = int(waited.total_seconds() // (tier.aging_after_minutes * 60))
    if steps <= 0:
        return base, 0
    gap = cap.score - tier.score
    per_point = (cap.scheduler_value - tier.scheduler_value) / gap if gap > 0 else 0
    raised = base + math.floor(steps * tier.aging_step * per_point)
    return max(base, min(raised, cap.scheduler_value)), steps


def _after_grant(
    ctx: Context, project: EffectiveProject, tier: PriorityTier, base: int
) -> tuple[int, str]:
    """A Workload at a tier the project may no longer use (its grant ended)."""
    allowed = {t.pk for t in project.allowed_tiers}
    if tier.pk in allowed:
        return base, ""
    if tier.after_grant == GrantEnd.LOWER:
        own = project.tier or ctx.rules.default_tier
        value = min(base, own.scheduler_value) if own is not None else base
        return value, f"grant of {tier.slug} ended: lowered to the project's tier ({value})"
    if tier.after_grant == GrantEnd.PREEMPT:
        return 0, f"grant of {tier.slug} ended: below every tier (0), preempted first"
    return base, f"grant of {tier.slug} ended: keeps running at it"


def _protected(ctx: Context, workload: Seen, counts: dict[str, int]) -> str:
    """Why admitted cautious work must not be preempted now ("" when it may be)."""
    quota = ctx.quota(workload)
    if quota is None or workload.admitted_at is None:
        return ""
    klass = quota.preemption_class
    if klass.kind != PreemptionKind.CAUTIOUS:
        return ""
    ran = ctx.at - workload.admitted_at
    if klass.min_runtime_minutes and ran < timedelta(minutes=klass.min_runtime_minutes):
        return (
            f"class {klass.slug}: ran {int(ran.total_seconds() // 60)} of its "
            f"{klass.min_runtime_minutes} minutes before preemption"
        )
    maximum = klass.max_preemptions_per_day
    if maximum and counts.get(klass.slug, 0) >= maximum:
        return f"class {klass.slug}: {counts[klass.slug]} preemptions today, its maximum {maximum}"
    return ""


def priority_of(ctx: Context, workload: Seen, counts: dict[str, int]) -> Decision:
    """The priority one Workload should have, and why (its class value when no rule acts)."""
    project = ctx.projects.get(workload.namespace)
    tier = ctx.tiers.get(workload.tier)
    if project is None or tier is None:
        return Decision(priority=workload.priority, why=workload.why)
    value, why = _after_grant(ctx, project, tier, tier.scheduler_value)
    if workload.admitted_at is None and workload.active and not why:
        value, steps = aged(tier, base=value, waited=ctx.at - workload.created)
        if steps:
            why = f"aging: {steps} step(s) of {tier.aging_after_minutes} minutes, {value}"
    protected = _protected(ctx, workload, counts)
    if protected:
        value, why = ctx.protect, f"{protected}: above every tier ({ctx.protect})"
    return Decision(priority=value, why=why)


def holds(ctx: Context, workloads: list[Seen]) -> dict[str, str]:
    """The Workloads to hold for a tier's GPU caps (key -> why): over the per-job cap, or past
    the tier's total across projects (admitted work counts first; then, oldest first, the
    work Kueue may admit; the newest admitted past the total is held too)."""
    held: dict[str, str] = {}
    by_tier: dict[str, list[Seen]] = {}
    for workload in workloads:
        tier = ctx.tiers.get(workload.tier)
        if tier is None or workload.namespace not in ctx.projects:
            continue
        if workload.active is False and not workload.held:
            continue  # deactivated by someone else: not Arbiter's to release
        if tier.max_gpus_per_job and workload.gpus > tier.max_gpus_per_job:
            held[workload.key] = (
                f"tier {tier.slug}: {workload.gpus} GPUs, past its cap of "
                f"{tier.max_gpus_per_job} per job"
            )
            continue
        if tier.max_gpus_total:
            by_tier.setdefault(workload.tier, []).append(workload)
    for name, members in by_tier.items():
        tier = ctx.tiers[name]
        cap = tier.max_gpus_total or 0
        running = sorted(
            (w for w in members if w.admitted_at is not None and w.active),
            key=lambda w: (w.admitted_at or w.created, w.name),
        )
        waiting = sorted(
            (w for w in members if w.admitted_at is None or not w.active),
            key=lambda w: (w.created, w.name),
        )
        used = 0
        for workload in [*running, *waiting]:
            if used + workload.gpus <= cap:
                used += workload.gpus
            else:
                held[workload.key] = (
                    f"tier {tier.slug}: {used} of its {cap} GPUs across projects in use"
                )
    return held


def preemptions_today(
    state: dict[str, Any], ctx: Context, workloads: list[Seen]
) -> tuple[dict[str, int], dict[str, Any]]:
    """Each class's preemptions today (Kueue's eviction counts, taken per day), and the new
    state: ``day``, per Workload uid its count at the day's start and its class and count."""
    day = timezone.localtime(ctx.at).date().isoformat()
    if state.get("day") != day:
        ends = {uid: seen_[1] for uid, seen_ in (state.get("seen") or {}).items()}
        state = {"day": day, "start": ends, "seen": {}}
    start: dict[str, int] = dict(state.get("start") or {})
    counts_seen: dict[str, list[Any]] = dict(state.get("seen") or {})
    today = timezone.localtime(ctx.at).replace(hour=0, minute=0, second=0, microsecond=0)
    for workload in workloads:
        quota = ctx.quota(workload)
        klass = quota.preemption_class.slug if quota is not None else ""
        previous = counts_seen.get(workload.uid)
        if previous is None and workload.uid not in start:
            # First seen today: made today, every preemption is today's; else those seen now
            # count from now on.
            start[workload.uid] = 0 if workload.created >= today else workload.preemptions
        klass = klass or (previous[0] if previous else "")
        counts_seen[workload.uid] = [
            klass,
            max(workload.preemptions, previous[1] if previous else 0),
        ]
    counts: dict[str, int] = {}
    for uid, (klass, count) in counts_seen.items():
        if klass:
            counts[klass] = counts.get(klass, 0) + max(0, count - start.get(uid, 0))
    return counts, {"day": day, "start": start, "seen": counts_seen}


def plan(ctx: Context, workloads: list[Seen], counts: dict[str, int]) -> Plan:
    """The patches that make every Workload what the rules say (none when it already is)."""
    result = Plan(counts=counts)
    held = holds(ctx, workloads)
    for workload in workloads:
        if workload.namespace not in ctx.projects:
            continue
        decision = priority_of(ctx, workload, counts)
        spec: dict[str, Any] = {}
        annotations: dict[str, Any] = {}
        what: list[str] = []
        if decision.priority is not None and decision.priority != workload.priority:
            spec["priority"] = decision.priority
            what.append(f"priority {workload.priority} → {decision.priority}")
        if decision.why != workload.why:
            annotations[WHY] = decision.why or None
        hold = held.get(workload.key, "")
        if hold and (workload.active or workload.held != hold):
            spec["active"] = False
            annotations[HELD] = hold
            what.append(f"held ({hold})")
        elif not hold and workload.held:
            spec["active"] = True
            annotations[HELD] = None
            what.append("released")
        if spec or annotations:
            body: dict[str, Any] = {}
            if spec:
                body["spec"] = spec
            if annotations:
                body["metadata"] = {"annotations": annotations}
            reason = decision.why if "priority" in spec else ""
            result.patches.append(
                Patch(workload.key, body, "; ".join(what + ([reason] if reason else [])))
            )
    return result


@dataclass
class EnforceResult:
    """One pass of the enforcer on one cluster."""

    cluster: str
    workloads: int = 0
    patched: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def _list(client: KubeClient) -> list[Seen]:
    status, body = client.request("GET", WORKLOADS)
    if status != 200:
        raise SchedulerError(
            _("Kueue's Workloads could not be read (%(status)s): %(msg)s")
            % {"status": status, "msg": body.get("message", "")}
        )
    return [seen(item) for item in body.get("items") or []]


def _apply(client: KubeClient, patch: Patch) -> str:
    """Send one patch; the error ("" when applied, or when the Workload is gone)."""
    namespace, name = patch.key.split("/", 1)
    status, body = client.request(
        "PATCH",
        f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads/{name}",
        query=[("fieldManager", FIELD_MANAGER)],
        body=patch.body,
        content_type="application/merge-patch+json",
    )
    if status in (200, 404):
        return ""
    return f"{patch.key}: {status} {body.get('message', '')}"


@transaction.atomic
def kueue_enforce(
    *,
    cluster: Cluster,
    connection: KueueConnection | None = None,
    at: datetime | None = None,
) -> EnforceResult:
    """One pass of the enforcer on a Kueue cluster (idempotent: a second pass at the same
    moment patches nothing). ``at``: the moment the rules are read for (now)."""
    at = at or timezone.now()
    connection = connection or KueueConnection.from_cluster(cluster)
    state, _created = ClusterSyncState.objects.select_for_update().get_or_create(cluster=cluster)
    result = EnforceResult(cluster=cluster.name)
    ctx = Context.build(
        rules=effective_rules(at=at),
        pools=list(cluster.pools.all()),
        template=connection.namespace_template,
        at=at,
    )
    client = KubeClient(connection)
    try:
        workloads = _list(client)
        counts, counted = preemptions_today(dict(state.enforcer or {}), ctx, workloads)
        todo = plan(ctx, workloads, counts)
        for patch in todo.patches:
            error = _apply(client, patch)
            if error:
                result.errors.append(error)
            else:
                result.patched.append(f"{patch.key}: {patch.what}")
    except SchedulerError as error:
        result.errors.append(str(error))
        counted = dict(state.enforcer or {})
        workloads = []
        counts = {}
    finally:
        client.close()
    result.workloads, result.counts = len(workloads), counts
    log = [
        *(state.enforcer or {}).get("log", []),
        *[{"at": at.isoformat(), "what": line} for line in result.patched],
    ][-LOG_SIZE:]
    state.enforcer = {**counted, "log": log, "errors": result.errors, "counts": counts}
    state.enforced_at = at
    state.save(update_fields=["enforcer", "enforced_at"])
    return result


def kueue_enforce_all(*, at: datetime | None = None) -> list[EnforceResult]:
    """Periodic: one pass on every enabled Kueue cluster that has been synced."""
    clusters = Cluster.objects.filter(
        enabled=True, backend=ClusterBackend.KUEUE, sync_state__applied_at__isnull=False
    )
    return [kueue_enforce(cluster=cluster, at=at) for cluster in clusters]
