"""Clusters: ops configure which scheduler enforces which pools. Every change has a reason."""

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from governance.models import Pool, User
from governance.services import governed_save
from queues.models import Cluster, ClusterBackend, ClusterSyncState

CLUSTER_EDITABLE = ("slurm_cluster", "slurm_conf", "command_prefix", "enabled", "pools")


def _require_ops(user: User) -> None:
    if not user.is_ops:
        raise PermissionDenied(_("Only ops may configure clusters."))


def _save(cluster: Cluster, *, user: User, reason: str, pools: Iterable[Pool] | None) -> None:
    governed_save(cluster, user=user, reason=reason)
    if pools is not None:
        cluster.pools.set(pools)


@transaction.atomic
def cluster_create(
    *,
    user: User,
    reason: str,
    name: str,
    slurm_cluster: str,
    pools: Iterable[Pool] = (),
    slurm_conf: str = "",
    command_prefix: str = "",
    enabled: bool = True,
    backend: str = ClusterBackend.SLURM,
) -> Cluster:
    _require_ops(user)
    cluster = Cluster(
        name=name,
        backend=backend,
        slurm_cluster=slurm_cluster,
        slurm_conf=slurm_conf,
        command_prefix=command_prefix,
        enabled=enabled,
    )
    _save(cluster, user=user, reason=reason, pools=list(pools))
    ClusterSyncState.objects.create(cluster=cluster)
    return cluster


@transaction.atomic
def cluster_update(*, cluster: Cluster, user: User, reason: str, data: dict[str, Any]) -> Cluster:
    _require_ops(user)
    unknown = set(data) - set(CLUSTER_EDITABLE)
    if unknown:
        raise ValidationError(
            {name: _("This field cannot be changed here.") for name in sorted(unknown)}
        )
    cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
    pools = data.get("pools")
    changed = pools is not None and {p.pk for p in pools} != set(
        cluster.pools.values_list("pk", flat=True)
    )
    for name, value in data.items():
        if name != "pools" and getattr(cluster, name) != value:
            setattr(cluster, name, value)
            changed = True
    if changed:
        _save(cluster, user=user, reason=reason, pools=list(pools) if pools is not None else None)
    return cluster
