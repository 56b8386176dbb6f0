"""The compiled organisation placement answers from, kept per process while it is right
(see the package's docstring): the fingerprint query, the compilation and the cache."""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.db.models import prefetch_related_objects
from django.utils import timezone

from governance.models import (
    ApiToken,
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
from governance.selectors import (
    EffectiveProject,
    api_token_lookup,
    effective_rules,
    newest_row_columns,
    pool_capacities,
)
from queues.models import Cluster, ClusterBackend
from queues.schedulers.backends import SchedulerError
from queues.schedulers.kueue.desired import DEFAULT_LOCAL_QUEUE, desired_objects
from queues.schedulers.kueue.values import LOCAL_QUEUE, SOURCE_ANNOTATION, WORKLOAD_PRIORITY_CLASS
from queues.schedulers.slurm.desired import desired_state
from queues.schedulers.slurm.values import ACCOUNT, ASSOCIATION, QOS, split_association
from queues.selectors.clusters import pool_gres_types
from queues.selectors.definitions import running_gpus_sql

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


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


def _with_jobs(fingerprint: str, project: str, flavor: str) -> str:
    """The fingerprint's columns, then the GPUs the project's running jobs hold of the flavor
    and without one (``project`` and ``flavor``: SQL, placeholders included), as
    ``definitions.running_gpus_sql`` compiles the one definition."""
    typed = running_gpus_sql(project=project, flavor=flavor)
    untyped = running_gpus_sql(project=project, flavor=None)
    return fingerprint + f", {typed}, {untyped}"


def _by_slug(slug: str) -> str:
    return (
        f"(SELECT {_quote('id')} FROM {_quote(Project._meta.db_table)} "
        f"WHERE {_quote('slug')} = {slug})"
    )


@functools.cache
def _read_sql() -> dict[str, str]:
    """The SQL of ``_read`` (built once: reaching a model's history model through its manager
    is slow): ``fingerprint`` alone; with the project's jobs ``by_id``, or ``by_slug`` (the
    project found by its slug); ``prepare``, the statement ``by_slug`` prepared on
    PostgreSQL (``$1`` slug, ``$2`` flavor id)."""
    columns = newest_row_columns(FINGERPRINT_MODELS, tables=[(RulesRevision._meta.db_table, "id")])
    fingerprint = "SELECT " + ", ".join(columns)
    return {
        "fingerprint": fingerprint,
        "by_id": _with_jobs(fingerprint, "%s", "%s"),
        "by_slug": _with_jobs(fingerprint, _by_slug("%s"), "%s"),
        "prepare": (
            f"PREPARE {PREPARED_READ} (text, bigint) AS "
            + _with_jobs(fingerprint, _by_slug("$1"), "$2")
        ),
    }


# The name of the prepared ``_read`` on PostgreSQL: planning its dozen subqueries costs more
# than running them, so each database connection plans it once.
PREPARED_READ = "arbiter_placement_read"
# ``read_with_token``'s, likewise.
PREPARED_TOKEN_READ = "arbiter_placement_token_read"


def _prepared(cursor: Any, name: str, statement: str) -> None:
    """Prepare ``statement`` as ``name`` once per database connection (prepared statements
    outlive transactions but not the connection)."""
    raw = connection.connection
    mark = f"_arbiter_prepared_{name}"  # on this thread's connection (the proxy forwards it)
    if getattr(connection, mark, None) is not raw:
        cursor.execute(statement)
        setattr(connection, mark, raw)


def _read(
    project_id: int | None = None, flavor_id: int | None = None, *, slug: str | None = None
) -> tuple[Any, ...]:
    """One query: the fingerprint, then the GPUs the project's running jobs hold of
    ``flavor_id`` and without a flavor (only when a project is given, by id or ``slug``).

    The fingerprint is the newest history row of every governed model placement reads and
    the newest rules revision (``MAX`` of a primary key each: an index lookup). On
    PostgreSQL the query by slug is a statement prepared once per database connection."""
    sql = _read_sql()
    with connection.cursor() as cursor:
        if slug is not None and connection.vendor == "postgresql":
            _prepared(cursor, PREPARED_READ, sql["prepare"])
            cursor.execute(f"EXECUTE {PREPARED_READ} (%s, %s)", [slug, flavor_id or 0])
        elif slug is not None:
            cursor.execute(sql["by_slug"], [slug, flavor_id or 0, slug])
        elif project_id is not None:
            cursor.execute(sql["by_id"], [project_id, flavor_id or 0, project_id])
        else:
            cursor.execute(sql["fingerprint"])
        return tuple(cursor.fetchone() or ())


@functools.cache
def _token_read_sql() -> dict[str, str]:
    """``read_with_token``'s SQL: every column of the token lookup (``api_token_lookup``),
    then those of ``_read`` by slug; ``plain`` (placeholders: the prefix, then ``by_slug``'s)
    and ``prepare`` (``$1`` prefix, ``$2`` slug, ``$3`` flavor id)."""
    token = api_token_lookup().sql
    if token.count("%s") != 1 or "%%" in token:
        raise ImproperlyConfigured("The token lookup must take the prefix alone, as %s.")
    fingerprint = _read_sql()["fingerprint"]

    def both(token_sql: str, read_sql: str) -> str:
        return f"SELECT token_.*, read_.* FROM ({token_sql}) token_ CROSS JOIN ({read_sql}) read_"

    return {
        "plain": both(token, _read_sql()["by_slug"]),
        "prepare": f"PREPARE {PREPARED_TOKEN_READ} (text, text, bigint) AS "
        + both(token.replace("%s", "$1"), _with_jobs(fingerprint, _by_slug("$2"), "$3")),
    }


def read_with_token(
    *, prefix: str, slug: str, flavor_id: int | None
) -> tuple[ApiToken, tuple[Any, ...]] | None:
    """One query for the hot path: the API token whose prefix is ``prefix`` (as the token
    lookup reads it: ``api_token_authenticate`` still checks it) and what ``_read`` reads of
    the project ``slug`` with ``flavor_id``. ``None`` when no token has that prefix."""
    lookup = api_token_lookup()
    if lookup.alias != connection.alias:
        raise ImproperlyConfigured("Tokens and the workload evidence are in one database.")
    sql = _token_read_sql()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            _prepared(cursor, PREPARED_TOKEN_READ, sql["prepare"])
            cursor.execute(
                f"EXECUTE {PREPARED_TOKEN_READ} (%s, %s, %s)", [prefix, slug, flavor_id or 0]
            )
        else:
            cursor.execute(sql["plain"], [prefix, slug, flavor_id or 0, slug])
        rows = cursor.fetchmany(1)
    if not rows:
        return None
    row = tuple(rows[0])
    return lookup.token_from_row(row), row[lookup.width :]


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
    capacities = pool_capacities()
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


def _compile_slurm(
    cluster: Cluster, pools: list[Pool], rules: Any, capacities: dict[tuple[int, int], int]
) -> SlurmCompiled:
    state = desired_state(
        rules=rules, pools=pools, capacities=capacities, gres_types=pool_gres_types(pools)
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
        if manifest["kind"] == LOCAL_QUEUE and meta["name"] != DEFAULT_LOCAL_QUEUE:
            # The pool's own queue; "default" (for Jobs without a queue name) is its twin.
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
