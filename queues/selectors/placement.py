"""Placement: where and how a project submits a job, and whether it may right now.

``placement`` answers ``GET /api/v1/placement/`` (the hot path of CI pipelines). The names it
gives are the ones the scheduler compilers generate: the Slurm accounts, QOS and user
associations of ``slurm.desired.desired_state`` and the namespaces, LocalQueues and
WorkloadPriorityClasses of ``kueue.desired.desired_objects``, both compiled from the
effective rules (``governance.selectors.effective_rules``, grants included).

Compiling the whole organisation takes a while, so the result is kept per process and reused
while it is still right. It is right while

* no governed rule changed: the *fingerprint* is the newest history row of every governed
  model placement reads (rules, grants, clusters) and the newest rules revision, read in one
  query of index-only lookups per request. Every write of a governed row makes a history row
  (house rule), so an applied change, a grant made, revoked, started or ended by the beat
  task, a seed or an admin edit all change it;
* the next grant boundary has not passed: a grant starts or ends at its own instant, before
  the beat task records it, so the compiled rules are valid only until the earliest
  ``starts_at``/``ends_at``/``revoked_at`` after the instant they were compiled at.

The workload evidence (running GPUs) is read per request, in the same query as the
fingerprint; the project is read through the scoped getter by the caller. So a warm answer
costs the project and that one query, whatever the size of the organisation.
"""

from __future__ import annotations

import functools
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Prefetch, Sum, prefetch_related_objects
from django.http import Http404
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import (
    GpuFlavor,
    Grant,
    Membership,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PreemptionKind,
    PriorityTier,
    Project,
    Quota,
    RulesRevision,
)
from governance.selectors import (
    EffectiveProject,
    EffectiveQuota,
    effective_rules,
    user_can_read_rules,
)
from queues.models import Cluster, ClusterBackend, JobState, WorkloadJob
from queues.services.backends import SchedulerError
from queues.services.kueue.desired import cluster_queue_name, desired_objects
from queues.services.kueue.values import (
    LOCAL_QUEUE,
    SOURCE_ANNOTATION,
    WORKLOAD_PRIORITY_CLASS,
)
from queues.services.slurm.desired import desired_state
from queues.services.slurm.values import (
    ACCOUNT,
    ASSOCIATION,
    QOS,
    guarantee_qos,
    project_account,
    split_association,
    tier_qos,
)

PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
GPU_RESOURCE = "nvidia.com/gpu"
# Governed models whose rows feed the compiled placement (their history marks every write).
FINGERPRINT_MODELS = (
    Project,
    Membership,
    Quota,
    GpuFlavor,
    Pool,
    PoolCapacity,
    PriorityTier,
    PreemptionClass,
    Grant,
    Cluster,
)


class Refusal:
    """Why a placement is not allowed right now (codes are part of the API)."""

    TIER_NOT_ALLOWED = "tier_not_allowed"
    TIER_RETIRED = "tier_retired"
    OVER_JOB_CAP = "over_job_cap"
    OVER_MAXIMUM = "over_maximum"
    UNKNOWN_FLAVOR = "unknown_flavor"
    NO_QUOTA = "no_quota"
    NO_TIER = "no_tier"
    NO_CLUSTER = "no_cluster"

    CODES = (
        TIER_NOT_ALLOWED,
        TIER_RETIRED,
        OVER_JOB_CAP,
        OVER_MAXIMUM,
        UNKNOWN_FLAVOR,
        NO_QUOTA,
        NO_TIER,
        NO_CLUSTER,
    )


class PlacementInputError(ValueError):
    """A parameter the caller must fix (a 400 naming it)."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__(errors)
        self.errors = errors


# --- the compiled organisation --------------------------------------------------------------


@dataclass
class SlurmCompiled:
    cluster: Cluster
    pools: list[Pool]
    qos: set[str]
    accounts: set[str]
    # account → (QOS list, default QOS) of its user associations (all alike per account).
    associations: dict[str, tuple[list[str], str]]
    error: str = ""


@dataclass
class KueueCompiled:
    cluster: Cluster
    pools: list[Pool]
    # ClusterQueue name → (namespace, LocalQueue name).
    local_queues: dict[str, tuple[str, str]]
    # tier slug → WorkloadPriorityClass name.
    priority_classes: dict[str, str]
    error: str = ""


@dataclass
class Compiled:
    fingerprint: tuple[Any, ...]
    at: datetime
    valid_until: datetime | None
    revision: int | None
    tiers: dict[str, PriorityTier]
    flavors: dict[str, GpuFlavor]
    capacities: dict[tuple[int, int], int]
    projects: dict[str, EffectiveProject]
    slurm: list[SlurmCompiled] = field(default_factory=list)
    kueue: list[KueueCompiled] = field(default_factory=list)


_lock = threading.Lock()
_compiled: Compiled | None = None


def placement_cache_clear() -> None:
    """Forget the compiled placement (tests that rebuild the database between them)."""
    global _compiled
    with _lock:
        _compiled = None


@functools.cache
def _read_sql() -> dict[str, str]:
    """The SQL of ``_read`` (built once: reaching a model's history model through its manager
    is slow): ``fingerprint`` alone; with the project's jobs ``by_id``, or ``by_slug`` (the
    project found by its slug); ``prepare``, the statement ``by_slug`` prepared on
    PostgreSQL (``$1`` slug, ``$2`` job state, ``$3`` flavor id)."""
    quote = connection.ops.quote_name
    tables = [
        (model.history.model._meta.db_table, "history_id")  # type: ignore[attr-defined]
        for model in FINGERPRINT_MODELS
    ]
    tables.append((RulesRevision._meta.db_table, "id"))
    columns = [f"(SELECT MAX({quote(column)}) FROM {quote(table)})" for table, column in tables]
    fingerprint = "SELECT " + ", ".join(columns)

    def with_jobs(project: str, state: str, flavor: str) -> str:
        jobs = (
            f"SELECT SUM({quote('gpus')}) FROM {quote(WorkloadJob._meta.db_table)} "
            f"WHERE {quote('project_id')} = {project} AND {quote('state')} = {state} "
            f"AND {quote('flavor_id')}"
        )
        return fingerprint + f", ({jobs} = {flavor}), ({jobs} IS NULL)"

    def by_slug(slug: str) -> str:
        return (
            f"(SELECT {quote('id')} FROM {quote(Project._meta.db_table)} "
            f"WHERE {quote('slug')} = {slug})"
        )

    return {
        "fingerprint": fingerprint,
        "by_id": with_jobs("%s", "%s", "%s"),
        "by_slug": with_jobs(by_slug("%s"), "%s", "%s"),
        "prepare": (
            f"PREPARE {PREPARED_READ} (text, text, bigint) AS "
            + with_jobs(by_slug("$1"), "$2", "$3")
        ),
    }


# The name of the prepared ``_read`` on PostgreSQL: planning its dozen subqueries costs more
# than running them, so each database connection plans it once.
PREPARED_READ = "arbiter_placement_read"


def _read(
    project_id: int | None = None, flavor_id: int | None = None, *, slug: str | None = None
) -> tuple[Any, ...]:
    """One query: the fingerprint, then the GPUs the project's running jobs hold of
    ``flavor_id`` and without a flavor (only when a project is given, by id or ``slug``).

    The fingerprint is the newest history row of every governed model placement reads and
    the newest rules revision (``MAX`` of a primary key each: an index lookup). On
    PostgreSQL the query by slug is a statement prepared once per database connection."""
    sql = _read_sql()
    running = str(JobState.RUNNING.value)
    with connection.cursor() as cursor:
        if slug is not None and connection.vendor == "postgresql":
            raw = connection.connection
            if getattr(connection, "_arbiter_placement_prepared", None) is not raw:
                # Prepared statements outlive transactions but not the connection.
                cursor.execute(sql["prepare"])
                connection._arbiter_placement_prepared = raw  # type: ignore[attr-defined]
            cursor.execute(f"EXECUTE {PREPARED_READ} (%s, %s, %s)", [slug, running, flavor_id or 0])
        elif slug is not None:
            cursor.execute(sql["by_slug"], [slug, running, flavor_id or 0, slug, running])
        elif project_id is not None:
            params: list[int | str] = [project_id, running, flavor_id or 0, project_id, running]
            cursor.execute(sql["by_id"], params)
        else:
            cursor.execute(sql["fingerprint"])
        return tuple(cursor.fetchone() or ())


FINGERPRINT_SIZE = len(FINGERPRINT_MODELS) + 1


def _next_grant_boundary(now: datetime) -> datetime | None:
    """The first instant after ``now`` at which a grant starts, ends or was revoked."""
    times: list[datetime] = []
    for starts, ends, revoked in Grant.objects.filter(ends_at__gt=now).values_list(
        "starts_at", "ends_at", "revoked_at"
    ):
        times.extend(t for t in (starts, ends, revoked) if t is not None and t > now)
    return min(times, default=None)


def _compile(fingerprint: tuple[Any, ...], now: datetime) -> Compiled:
    rules = effective_rules(at=now)
    tiers = list(rules.tiers)
    prefetch_related_objects(tiers, "preemptible_tiers")
    prefetch_related_objects(
        [project.project for project in rules.projects.values()],
        Prefetch("memberships", queryset=Membership.objects.select_related("user")),
    )
    capacities = {
        (pool_id, flavor_id): gpus
        for pool_id, flavor_id, gpus in PoolCapacity.objects.values_list(
            "pool_id", "flavor_id", "gpus"
        )
    }
    revision = RulesRevision.objects.order_by("-pk").values_list("pk", flat=True).first()
    compiled = Compiled(
        fingerprint=fingerprint,
        at=now,
        valid_until=_next_grant_boundary(now),
        revision=revision,
        tiers={tier.slug: tier for tier in tiers},
        flavors={flavor.slug: flavor for flavor in GpuFlavor.objects.all()},
        capacities=capacities,
        projects=rules.projects,
    )
    clusters = Cluster.objects.filter(enabled=True).prefetch_related("pools").order_by("name")
    for cluster in clusters:
        pools = sorted(cluster.pools.all(), key=lambda pool: pool.slug)
        if cluster.backend == ClusterBackend.SLURM:
            compiled.slurm.append(_compile_slurm(cluster, pools, rules, capacities))
        elif cluster.backend == ClusterBackend.KUEUE:
            compiled.kueue.append(_compile_kueue(cluster, pools, rules, capacities, revision))
    return compiled


def _gres_types(pools: list[Pool]) -> dict[int, list[str]]:
    from queues.services.sync import pool_gres_types

    return pool_gres_types(pools)


def _compile_slurm(
    cluster: Cluster, pools: list[Pool], rules: Any, capacities: dict[tuple[int, int], int]
) -> SlurmCompiled:
    state = desired_state(
        rules=rules, pools=pools, capacities=capacities, gres_types=_gres_types(pools)
    )
    associations: dict[str, tuple[list[str], str]] = {}
    for name, fields in sorted(state[ASSOCIATION].items()):
        _user, account = split_association(name)
        qos = [item for item in fields.get("qos", "").split(",") if item]
        associations.setdefault(account, (qos, fields.get("default_qos", "")))
    return SlurmCompiled(
        cluster=cluster,
        pools=pools,
        qos=set(state[QOS]),
        accounts=set(state[ACCOUNT]),
        associations=associations,
    )


def _compile_kueue(
    cluster: Cluster,
    pools: list[Pool],
    rules: Any,
    capacities: dict[tuple[int, int], int],
    revision: int | None,
) -> KueueCompiled:
    try:
        objects = desired_objects(
            rules=rules,
            pools=pools,
            capacities=capacities,
            namespace_template=cluster.kube_namespace_template,
            revision=revision,
        )
    except SchedulerError as error:
        return KueueCompiled(cluster, pools, {}, {}, error=str(error))
    local_queues: dict[str, tuple[str, str]] = {}
    priority_classes: dict[str, str] = {}
    for manifest in objects.manifests:
        meta = manifest["metadata"]
        if manifest["kind"] == LOCAL_QUEUE:
            local_queues[manifest["spec"]["clusterQueue"]] = (meta["namespace"], meta["name"])
        elif manifest["kind"] == WORKLOAD_PRIORITY_CLASS:
            source = meta.get("annotations", {}).get(SOURCE_ANNOTATION, "")
            priority_classes[source.removeprefix("tier ")] = meta["name"]
    return KueueCompiled(cluster, pools, local_queues, priority_classes)


def compiled_placement(*, now: datetime | None = None) -> Compiled:
    """The compiled organisation, rebuilt when a rule changed or a grant boundary passed."""
    now = now or timezone.now()
    return _current(_read(), now)


def _current(fingerprint: tuple[Any, ...], now: datetime) -> Compiled:
    global _compiled
    current = _compiled
    if current is not None and _usable(current, fingerprint, now):
        return current
    with _lock:
        current = _compiled
        if current is None or not _usable(current, fingerprint, now):
            current = _compile(fingerprint, now)
            _compiled = current
        return current


def _usable(compiled: Compiled | None, fingerprint: tuple[Any, ...], now: datetime) -> bool:
    return (
        compiled is not None
        and compiled.fingerprint == fingerprint
        and compiled.at <= now
        and (compiled.valid_until is None or now < compiled.valid_until)
    )


# --- one answer -------------------------------------------------------------------------------


def _refusal(code: str, detail: str) -> dict[str, str]:
    return {"code": code, "detail": detail}


def _running_gpus(project: Project, flavor_id: int | None) -> tuple[int, int]:
    """GPUs the project's running jobs hold of ``flavor_id``, and without a flavor."""
    jobs = WorkloadJob.objects.filter(project=project, state=JobState.RUNNING).order_by()
    typed = jobs.filter(flavor_id=flavor_id).aggregate(total=Sum("gpus"))["total"]
    untyped = jobs.filter(flavor__isnull=True).aggregate(total=Sum("gpus"))["total"]
    return int(typed or 0), int(untyped or 0)


def _flavor_guess(compiled: Compiled | None, slug: str, flavor: str | None) -> int | None:
    """The flavor the answer will be about, as far as the last compiled rules tell."""
    if compiled is None:
        return None
    if flavor:
        known = compiled.flavors.get(flavor)
        return known.pk if known else None
    effective = compiled.projects.get(slug)
    ids = {q.quota.flavor_id for q in effective.quotas} if effective else set()
    return next(iter(ids)) if len(ids) == 1 else None


def _quota_maximum(quota: EffectiveQuota, capacities: dict[tuple[int, int], int]) -> int:
    """What the compilers use as the quota's maximum (no borrow limit: the pool's capacity)."""
    if quota.maximum is not None:
        return quota.maximum
    key = (quota.quota.pool_id, quota.quota.flavor_id)
    return max(capacities.get(key, 0), quota.guarantee)


def _tier_out(tier: PriorityTier | None) -> dict[str, Any] | None:
    if tier is None:
        return None
    return {
        "slug": tier.slug,
        "name": tier.name,
        "scheduler_value": tier.scheduler_value,
        "max_gpus_per_job": tier.max_gpus_per_job,
    }


def placement(
    *,
    project: Project,
    gpus: int,
    tier: str | None = None,
    flavor: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Where and how ``project`` submits ``gpus`` GPUs of ``flavor`` at ``tier``, and whether
    it may right now (``refusals`` say why not). Raises ``PlacementInputError`` for a tier or
    flavor that does not exist, or a missing flavor the project's quotas do not settle."""
    now = now or timezone.now()
    guess = _flavor_guess(_compiled, project.slug, flavor)
    row = _read(project.pk, guess)
    compiled = _current(row[:FINGERPRINT_SIZE], now)
    return _answer(compiled, row, guess, project, gpus, tier, flavor, now)


def placement_for(
    *,
    user: Any,
    project: str,
    gpus: int,
    tier: str | None = None,
    flavor: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """``placement`` of the project whose slug is ``project``, as ``user`` sees it: a 404
    when it does not exist or ``user`` may not read the rules (as the scoped getter
    ``project_get`` decides). The project comes from the compiled rules, checked by the
    same one query that reads the fingerprint and the running GPUs (the API's hot path)."""
    if not user_can_read_rules(user):
        raise Http404
    now = now or timezone.now()
    guess = _flavor_guess(_compiled, project, flavor)
    row = _read(None, guess, slug=project)
    compiled = _current(row[:FINGERPRINT_SIZE], now)
    effective = compiled.projects.get(project)
    if effective is None:
        raise Http404
    return _answer(compiled, row, guess, effective.project, gpus, tier, flavor, now)


def _answer(
    compiled: Compiled,
    row: tuple[Any, ...],
    guess: int | None,
    project: Project,
    gpus: int,
    tier: str | None,
    flavor: str | None,
    now: datetime,
) -> dict[str, Any]:
    running_typed, untyped_running = int(row[-2] or 0), int(row[-1] or 0)
    effective = compiled.projects.get(project.slug)
    errors: dict[str, str] = {}
    chosen_tier: PriorityTier | None = None
    if tier:
        chosen_tier = compiled.tiers.get(tier)
        if chosen_tier is None:
            errors["tier"] = _("No tier named “%(slug)s”.") % {"slug": tier}
    elif effective is not None:
        chosen_tier = effective.tier
    quotas = list(effective.quotas) if effective is not None else []
    project_flavors = sorted(
        {q.quota.flavor.slug: q.quota.flavor for q in quotas}.values(), key=lambda f: f.slug
    )
    chosen_flavor: GpuFlavor | None = None
    if flavor:
        chosen_flavor = compiled.flavors.get(flavor)
        if chosen_flavor is None:
            errors["flavor"] = _("No GPU flavor named “%(slug)s”.") % {"slug": flavor}
    elif len(project_flavors) == 1:
        chosen_flavor = project_flavors[0]
    elif len(project_flavors) > 1:
        errors["flavor"] = _(
            "The project has quotas of several flavors (%(flavors)s): choose one."
        ) % {"flavors": ", ".join(f.slug for f in project_flavors)}
    if errors:
        raise PlacementInputError(errors)

    refusals: list[dict[str, str]] = []
    allowed_tiers = list(effective.allowed_tiers) if effective is not None else []
    if chosen_tier is None:
        refusals.append(
            _refusal(Refusal.NO_TIER, _("No tier was given and the project has no tier."))
        )
    else:
        if chosen_tier.retired_on is not None and chosen_tier.retired_on <= now.date():
            refusals.append(
                _refusal(
                    Refusal.TIER_RETIRED,
                    _("Tier %(tier)s was retired on %(date)s.")
                    % {"tier": chosen_tier.slug, "date": chosen_tier.retired_on.isoformat()},
                )
            )
        if chosen_tier not in allowed_tiers:
            top = effective.tier if effective is not None else None
            refusals.append(
                _refusal(
                    Refusal.TIER_NOT_ALLOWED,
                    _(
                        "Project %(project)s may not submit at tier %(tier)s: its highest "
                        "tier is %(top)s."
                    )
                    % {
                        "project": project.slug,
                        "tier": chosen_tier.slug,
                        "top": top.slug if top else _("none"),
                    },
                )
            )
        cap = chosen_tier.max_gpus_per_job
        if cap and gpus > cap:
            refusals.append(
                _refusal(
                    Refusal.OVER_JOB_CAP,
                    _("Tier %(tier)s allows at most %(cap)d GPUs per job; %(gpus)d asked.")
                    % {"tier": chosen_tier.slug, "cap": cap, "gpus": gpus},
                )
            )

    if chosen_flavor is not None and chosen_flavor.pk != guess:
        # The rules were compiled anew and name another flavor: read its jobs (rare).
        running_typed, untyped_running = _running_gpus(project, chosen_flavor.pk)
    headroom: dict[str, Any] | None = None
    flavor_quotas: list[EffectiveQuota] = []
    if chosen_flavor is None:
        refusals.append(
            _refusal(
                Refusal.NO_QUOTA,
                _("Project %(project)s has no GPU quota.") % {"project": project.slug},
            )
        )
    else:
        flavor_quotas = [q for q in quotas if q.quota.flavor_id == chosen_flavor.pk]
        if not flavor_quotas:
            refusals.append(
                _refusal(
                    Refusal.UNKNOWN_FLAVOR,
                    _("Project %(project)s has no quota of flavor %(flavor)s.")
                    % {"project": project.slug, "flavor": chosen_flavor.slug},
                )
            )
        else:
            used = running_typed
            # Jobs reported without a flavor hold the project's only flavor, if it has one.
            if len(project_flavors) == 1:
                used += untyped_running
            guarantee = sum(q.guarantee for q in flavor_quotas)
            maximum = sum(_quota_maximum(q, compiled.capacities) for q in flavor_quotas)
            headroom = {
                "flavor": chosen_flavor.slug,
                "running_gpus": used,
                "guarantee": guarantee,
                "maximum": maximum,
                "borrow_limit_lifted": any(q.borrow_limit is None for q in flavor_quotas),
                "under_guarantee": max(guarantee - used, 0),
                "under_maximum": max(maximum - used, 0),
                "within_guarantee": used + gpus <= guarantee,
                "changed_by_grants": sorted(
                    {grant.pk for q in flavor_quotas for grant in q.grants}
                ),
            }
            if used + gpus > maximum:
                refusals.append(
                    _refusal(
                        Refusal.OVER_MAXIMUM,
                        _(
                            "Project %(project)s runs %(used)d of its maximum %(maximum)d "
                            "%(flavor)s GPUs: %(gpus)d more would go over it."
                        )
                        % {
                            "project": project.slug,
                            "used": used,
                            "maximum": maximum,
                            "flavor": chosen_flavor.slug,
                            "gpus": gpus,
                        },
                    )
                )

    slurm_routes, kueue_routes = _routes(
        compiled, project.slug, chosen_tier, chosen_flavor, flavor_quotas, gpus
    )
    if flavor_quotas and not slurm_routes and not kueue_routes:
        refusals.append(
            _refusal(
                Refusal.NO_CLUSTER,
                _("No enabled cluster serves the pools of the project's %(flavor)s quota.")
                % {"flavor": chosen_flavor.slug if chosen_flavor else ""},
            )
        )
    grants = effective.grants if effective is not None else ()
    return {
        "project": project.slug,
        "gpus": gpus,
        "tier": _tier_out(chosen_tier),
        "tier_given": bool(tier),
        "flavor": None
        if chosen_flavor is None
        else {
            "slug": chosen_flavor.slug,
            "name": chosen_flavor.name,
            "gres_type": chosen_flavor.gres_type,
        },
        "at": now,
        "rules_revision": compiled.revision,
        "allowed": not refusals,
        "refusals": refusals,
        "project_tier": effective.tier.slug if effective and effective.tier else None,
        "allowed_tiers": [t.slug for t in allowed_tiers],
        "headroom": headroom,
        "untyped_running_gpus": untyped_running,
        "grants": [
            {"id": g.pk, "kind": g.kind, "starts_at": g.starts_at, "ends_at": g.ends_at}
            for g in grants
        ],
        "slurm": slurm_routes,
        "kubernetes": kueue_routes,
    }


def _routes(
    compiled: Compiled,
    slug: str,
    tier: PriorityTier | None,
    flavor: GpuFlavor | None,
    quotas: list[EffectiveQuota],
    gpus: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    by_pool: dict[int, list[EffectiveQuota]] = defaultdict(list)
    for quota in quotas:
        by_pool[quota.quota.pool_id].append(quota)
    slurm: list[dict[str, Any]] = []
    kueue: list[dict[str, Any]] = []
    if flavor is None:
        return slurm, kueue
    gres = f"gpu:{flavor.gres_type}:{gpus}" if flavor.gres_type else f"gpu:{gpus}"
    for target in compiled.slurm:
        for pool in target.pools:
            pool_quotas = by_pool.get(pool.pk)
            if not pool_quotas:
                continue
            account = project_account(pool, slug)
            if account not in target.accounts:
                continue
            forbidden = any(
                _kind(q.preemption_class) == PreemptionKind.FORBIDDEN for q in pool_quotas
            )
            qos = tier_qos(tier, protected=forbidden) if tier is not None else ""
            if qos and qos not in target.qos:
                qos = ""
            association_qos, default_qos = target.associations.get(account, ([], ""))
            guarantee = guarantee_qos(pool, slug)
            partition = target.cluster.slurm_partition
            options = [f"--account={account}"]
            if partition:
                options.append(f"--partition={partition}")
            if qos:
                options.append(f"--qos={qos}")
            options.append(f"--gres={gres}")
            slurm.append(
                {
                    "cluster": target.cluster.name,
                    "slurm_cluster": target.cluster.slurm_cluster,
                    "pool": pool.slug,
                    "account": account,
                    "qos": qos or None,
                    "partition": partition or None,
                    "gres": gres,
                    "guarantee_qos": guarantee if guarantee in target.qos else None,
                    "borrow_qos": [
                        name for name in association_qos if name.startswith(f"{pool.slug}.borrow")
                    ],
                    "default_qos": default_qos or None,
                    "sbatch_options": options,
                    "sbatch": " ".join(options),
                }
            )
    for kube in compiled.kueue:
        for pool in kube.pools:
            if not by_pool.get(pool.pk):
                continue
            found = kube.local_queues.get(cluster_queue_name(slug, pool.slug))
            if found is None:
                continue
            namespace, local_queue = found
            labels = {QUEUE_NAME_LABEL: local_queue}
            priority_class = kube.priority_classes.get(tier.slug) if tier else None
            if priority_class:
                labels[PRIORITY_CLASS_LABEL] = priority_class
            kueue.append(
                {
                    "cluster": kube.cluster.name,
                    "pool": pool.slug,
                    "namespace": namespace,
                    "local_queue": local_queue,
                    "cluster_queue": cluster_queue_name(slug, pool.slug),
                    "priority_class": priority_class,
                    "labels": labels,
                    "resources": {GPU_RESOURCE: str(gpus)},
                    "node_selector": {
                        str(k): str(v) for k, v in sorted((flavor.node_labels or {}).items())
                    },
                }
            )
    return slurm, kueue


def _kind(klass: PreemptionClass) -> str:
    return str(klass.kind)


__all__ = [
    "PlacementInputError",
    "Refusal",
    "compiled_placement",
    "placement",
    "placement_cache_clear",
    "placement_for",
]
