"""The backend that syncs a cluster, the desired state it compiles, and the GitOps export."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from django.db.models import prefetch_related_objects
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import (
    PoolCapacity,
)
from governance.selectors import EffectiveRules, effective_rules
from queues.models import (
    Cluster,
    ClusterBackend,
    SubmitTableDelivery,
)
from queues.schedulers.backends import (
    SchedulerBackend,
    SchedulerError,
    State,
    gc_paused,
)
from queues.selectors.clusters import pool_gres_types

from ..kueue import KueueBackend, KueueConnection
from ..kueue.export import ExportResult, export_objects
from ..slurm import SlurmBackend, commands_for


def backend_for(cluster: Cluster, *, force_conflicts: bool = False) -> SchedulerBackend:
    if cluster.backend == ClusterBackend.KUEUE:
        return KueueBackend(
            connection=KueueConnection.from_cluster(cluster), force_conflicts=force_conflicts
        )
    return SlurmBackend(
        cluster_name=cluster.slurm_cluster,
        commands=commands_for(cluster),
        table_pulled=cluster.submit_table_delivery == SubmitTableDelivery.PULL,
        on_expiry=cluster.submit_table_lapse,
    )


def sync_export(*, cluster: Cluster, directory: str, at: datetime | None = None) -> ExportResult:
    """Write the Kueue objects of ``cluster``'s pools into ``directory`` (GitOps): the same
    objects, validated the same way, as a sync of a Kueue cluster applies. Nothing is sent
    to any cluster, so a cluster of any backend can be exported."""
    target = Path(directory)
    if not target.is_dir():
        raise SchedulerError(_("The export directory %(dir)s does not exist.") % {"dir": directory})
    # Written for a server that serves MutatingAdmissionPolicy (Kubernetes 1.34+ with it
    # enabled): Jobs without a tier get their project's tier.
    backend = KueueBackend(connection=KueueConnection.from_cluster(cluster), mutating=True)
    desired_state_for(cluster=cluster, backend=backend, at=at or timezone.now())
    if backend.objects is None:
        raise SchedulerError(_("Nothing was compiled for %(cluster)s.") % {"cluster": cluster})
    return export_objects(backend.objects, target)


@gc_paused()
def desired_state_for(
    *,
    cluster: Cluster,
    backend: SchedulerBackend,
    at: datetime,
    rules: EffectiveRules | None = None,
) -> State:
    """The desired state of ``cluster`` from the effective rules at ``at`` (``rules``: those
    rules, already read)."""
    rules = effective_rules(at=at) if rules is None else rules
    prefetch_related_objects(list(rules.tiers), "preemptible_tiers")
    pools = list(cluster.pools.all())
    capacities = {
        (capacity.pool_id, capacity.flavor_id): capacity.gpus
        for capacity in PoolCapacity.objects.filter(pool__in=pools)
    }
    return backend.desired_state(
        rules=rules, pools=pools, capacities=capacities, gres_types=pool_gres_types(pools)
    )
