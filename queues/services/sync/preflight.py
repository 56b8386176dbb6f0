"""What the cluster must offer before a sync writes (tracked TRES, node GRES), and how it
enforces each rule."""

from __future__ import annotations

from datetime import datetime

from django.utils.translation import gettext as _

from governance.models import (
    PoolCapacity,
)
from governance.selectors import EffectiveRules, effective_rules
from queues.models import (
    Cluster,
)
from queues.schedulers.backends import (
    Ability,
    SchedulerBackend,
    SchedulerError,
)
from queues.selectors.clusters import pool_flavors, pool_gres_types

from ..slurm.enforcement import rule_enforcement
from .backend import backend_for
from .state import _state


def cluster_preflight(
    *, cluster: Cluster, pools: list | None = None, backend: SchedulerBackend | None = None
) -> list[str]:
    """What stops ``cluster`` from holding ``pools`` (default: the ones it serves).

    Reads the TRES the cluster's accounting tracks; a flavor whose GRES type is not tracked
    cannot be limited (Slurm refuses the limit, or ignores it), so the plan is refused with
    the ``slurm.conf`` line that fixes it. Then reads the nodes (``sinfo``): a flavor whose
    GRES type no node offers is refused too, with the node lines expected. Empty: nothing
    stops it. Raises ``SchedulerError`` when the cluster does not answer.
    """
    backend = backend or backend_for(cluster)
    if not backend.offers(Ability.PREFLIGHT):  # the backend's own validation covers it
        return []
    pools = list(cluster.pools.all()) if pools is None else list(pools)
    tracked = backend.tracked_tres()
    needed = {"gres/gpu"} | {
        f"gres/gpu:{gres}" for flavors in pool_flavors(pools).values() for gres in flavors
    }
    unoffered = _unoffered_gres(cluster=cluster, pools=pools, backend=backend)
    if needed <= tracked:
        return unoffered
    line = "AccountingStorageTRES=" + ",".join(
        sorted(name for name in tracked | needed if name.startswith("gres/"))
    )
    messages = []
    for pool in sorted(pools, key=lambda p: p.slug):
        for gres, flavor in sorted(pool_flavors([pool])[pool.pk].items()):
            if f"gres/gpu:{gres}" not in tracked:
                messages.append(
                    _(
                        "Flavor %(flavor)s of pool %(pool)s needs the TRES gres/gpu:%(gres)s, "
                        "which cluster %(cluster)s does not track. Set “%(line)s” in its "
                        "slurm.conf (and GresTypes=gpu, the nodes' Gres=gpu:%(gres)s:N), "
                        "restart slurmctld, then sync again."
                    )
                    % {
                        "flavor": flavor,
                        "pool": pool.name,
                        "gres": gres,
                        "cluster": cluster.name,
                        "line": line,
                    }
                )
    if "gres/gpu" not in tracked:
        messages.append(
            _("Cluster %(cluster)s does not track gres/gpu. Set “%(line)s” in its slurm.conf.")
            % {"cluster": cluster.name, "line": line}
        )
    return [str(message) for message in messages] + unoffered


def _gres_types(gres: str) -> set[str]:
    """``gpu:a100:4(S:0),gpu:h100:4`` → ``{"a100", "h100"}`` (untyped GPUs give none)."""
    types = set()
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu" and len(parts) == 3:
            types.add(parts[1].lower())
    return types


def _unoffered_gres(*, cluster: Cluster, pools: list, backend: SchedulerBackend) -> list[str]:
    """Flavors whose GRES type no node of the cluster offers (``sinfo``), with the node lines
    that would offer it: a quota on them could never run, so nothing is written."""
    if not backend.offers(Ability.PREFLIGHT):
        return []
    nodes = backend.node_gres()
    offered = set().union(*(_gres_types(gres) for gres in nodes.values())) if nodes else set()
    capacity = {
        (pool_id, gres_type.lower()): gpus
        for pool_id, gres_type, gpus in PoolCapacity.objects.filter(pool__in=pools).values_list(
            "pool_id", "flavor__gres_type", "gpus"
        )
        if gres_type
    }
    shown = "; ".join(f"{node} {gres or '(no gres)'}" for node, gres in sorted(nodes.items()))
    messages = []
    for pool in sorted(pools, key=lambda p: p.slug):
        for gres, flavor in sorted(pool_flavors([pool])[pool.pk].items()):
            if gres in offered:
                continue
            count = capacity.get((pool.pk, gres)) or 1
            messages.append(
                _(
                    "Flavor %(flavor)s of pool %(pool)s asks for GPU type %(gres)s, which no node "
                    "of cluster %(cluster)s offers (nodes: %(nodes)s). Expected node lines such "
                    "as “NodeName=<node> Gres=gpu:%(gres)s:%(count)d” in slurm.conf and "
                    "“NodeName=<node> Name=gpu Type=%(gres)s File=/dev/nvidia[0-%(last)d]” in "
                    "gres.conf; restart slurmctld and slurmd, then sync again."
                )
                % {
                    "flavor": flavor,
                    "pool": pool.name,
                    "gres": gres,
                    "cluster": cluster.name,
                    "nodes": shown or "—",
                    "count": count,
                    "last": count - 1,
                }
            )
    return [str(message) for message in messages]


def enforcement_for(
    *,
    cluster: Cluster,
    backend: SchedulerBackend,
    at: datetime,
    rules: EffectiveRules | None = None,
    config: dict[str, str] | None = None,
) -> list[dict[str, str]]:
    """How the cluster enforces each rule (see ``slurm.enforcement``, ``kueue.enforcement``;
    ``rules``: the effective rules at ``at``, already read; ``config``: Slurm's settings,
    already read)."""
    rules = effective_rules(at=at) if rules is None else rules
    pools = list(cluster.pools.all())
    if backend.offers(Ability.RULE_ENFORCEMENT):
        return list(backend.rule_enforcement(rules=rules, pools=pools))
    if not backend.offers(Ability.PRIORITY_CONFIG):
        return []
    try:
        priorities = backend.priority_config(config=config)
    except SchedulerError:
        priorities = {}
    return rule_enforcement(
        rules=rules,
        pools=pools,
        gres_types=pool_gres_types(pools),
        priority_config=priorities,
        plugin=_state(cluster).submit_plugin,
    )


def _scheduler_config(backend: SchedulerBackend) -> dict[str, str] | None:
    """Slurm's settings in one call; None when not Slurm or not read (then each check
    reads, and reports, for itself)."""
    if not backend.offers(Ability.SCHEDULER_CONFIG):
        return None
    try:
        return backend.scheduler_config()
    except SchedulerError:
        return None
