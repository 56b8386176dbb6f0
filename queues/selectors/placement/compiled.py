"""The compiled organisation placement answers from, kept per process while it is right
(see the package's docstring): the fingerprint query, the compilation and the cache."""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Prefetch, prefetch_related_objects
from django.utils import timezone

from governance.models import (
    GpuFlavor,
    Grant,
    Membership,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PriorityTier,
    Project,
    Quota,
    RulesRevision,
)
from governance.selectors import EffectiveProject, effective_rules
from queues.models import Cluster, ClusterBackend, JobState, WorkloadJob
from queues.services.backends import SchedulerError
from queues.services.kueue.desired import desired_objects
from queues.services.kueue.values import LOCAL_QUEUE, SOURCE_ANNOTATION, WORKLOAD_PRIORITY_CLASS
from queues.services.slurm.desired import desired_state
from queues.services.slurm.values import ACCOUNT, ASSOCIATION, QOS, split_association

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
    # Answers given from these rules (``answer.placement_for``), by everything they depend on.
    answers: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)


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
