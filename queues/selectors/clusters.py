"""Reads of the clusters: who may see them, their sync runs, sync due, live status, the
objects last applied and the GPU types their pools hold.

Nothing here calls a scheduler: the live status is what the last check stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import Pool, PoolCapacity, PriorityTier, Quota, RulesRevision
from queues.models import Cluster, ClusterSyncState, SyncRun
from queues.schedulers.backends import ACTION_LABELS
from queues.schedulers.slurm.config import slurm_conf_lines


def user_can_see_clusters(user: Any) -> bool:
    return bool(user.is_authenticated and getattr(user, "is_ops", False))


def require_cluster_access(user: Any) -> None:
    if not user_can_see_clusters(user):
        raise PermissionDenied(_("Only ops may see and sync clusters."))


def newest_revision_id() -> int | None:
    return RulesRevision.objects.order_by("-pk").values_list("pk", flat=True).first()


def cluster_list() -> QuerySet[Cluster]:
    """Clusters with their pools, sync state and latest run (a fixed number of queries)."""
    latest = SyncRun.objects.filter(cluster=OuterRef("pk")).order_by("-pk")
    return (
        Cluster.objects.select_related("sync_state", "sync_state__applied_revision")
        .prefetch_related("pools")
        .annotate(
            latest_run_status=Subquery(latest.values("status")[:1]),
            latest_run_at=Subquery(latest.values("created_at")[:1]),
            run_count=Count("sync_runs", distinct=True),
        )
        .order_by("name")
    )


def cluster_get(*, user: Any, name: str) -> Cluster:
    require_cluster_access(user)
    return get_object_or_404(
        Cluster.objects.select_related("sync_state", "sync_state__applied_revision"), name=name
    )


def stored_sync_state(cluster: Cluster) -> ClusterSyncState:
    """The cluster's sync state as stored now (a query), for callers that hold a cluster
    object longer than a request: its cached ``sync_state`` may be older than a sync since."""
    found = ClusterSyncState.objects.filter(cluster=cluster).first()
    return found or ClusterSyncState(cluster=cluster)


def sync_state(cluster: Cluster) -> ClusterSyncState:
    """The cluster's stored sync state (already loaded by ``cluster_get``: no query)."""
    try:
        return cluster.sync_state
    except ClusterSyncState.DoesNotExist:
        return ClusterSyncState(cluster=cluster)


_UNSET: Any = object()


def sync_due(
    cluster: Cluster, *, newest: int | None = _UNSET, state: ClusterSyncState | None = None
) -> bool:
    """True while the cluster has not applied the newest rules revision, or its last sync
    failed, or drift was found (``newest``: the newest revision's id when the caller has it,
    ``None`` when there is none)."""
    newest = newest_revision_id() if newest is _UNSET else newest
    state = state or stored_sync_state(cluster)
    if state.due_reason:
        return True
    if newest is None:
        return state.applied_at is None
    return (state.applied_revision_id or 0) < newest


def cluster_list_with_due() -> list[tuple[Cluster, bool]]:
    """Every cluster and whether its sync is due (a fixed number of queries)."""
    newest = newest_revision_id()
    result = []
    for cluster in cluster_list():
        state = getattr(cluster, "sync_state", None) or ClusterSyncState(cluster=cluster)
        result.append((cluster, sync_due(cluster, newest=newest, state=state)))
    return result


def sync_run_list(*, cluster: Cluster) -> QuerySet[SyncRun]:
    return SyncRun.objects.filter(cluster=cluster).select_related("requested_by", "revision")


def plan_with_labels(plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stored plan with each change's action as a translated label (for pages)."""
    labels = {str(action): str(label) for action, label in ACTION_LABELS.items()}
    return [
        {**change, "action_label": labels.get(str(change.get("action", "")), "")} for change in plan
    ]


def sync_run_get(*, user: Any, cluster: Cluster, pk: int) -> SyncRun:
    require_cluster_access(user)
    return get_object_or_404(sync_run_list(cluster=cluster), pk=pk)


@dataclass
class LiveStatus:
    """What the last check found (stored: reading it runs no scheduler command).

    ``reachable`` is ``None`` until the first check; ``drift`` is what the last drift
    check found against the last sync.
    """

    reachable: bool | None
    error: str = ""
    checked_at: datetime | None = None
    version: str = ""
    tracked_resources: list[str] = field(default_factory=list)
    drift: list[dict[str, str]] = field(default_factory=list)
    drift_checked_at: datetime | None = None
    drift_error: str = ""

    @property
    def age(self) -> timedelta | None:
        return timezone.now() - self.checked_at if self.checked_at else None


def cluster_live_status(*, cluster: Cluster, state: ClusterSyncState | None = None) -> LiveStatus:
    """The stored result of the last connection and drift checks ("Check now" refreshes
    them in a worker); never calls the scheduler."""
    state = state or stored_sync_state(cluster)
    reachable = state.check_ok
    error = state.check_error
    if reachable is None and state.drift_checked_at is not None:
        # Only the periodic drift check has run: it tells whether Slurm answered.
        reachable = not state.drift_error
        error = state.drift_error
    return LiveStatus(
        reachable=reachable,
        error=error,
        checked_at=state.checked_at or state.drift_checked_at,
        version=state.scheduler_version,
        tracked_resources=list(state.tracked_resources or []),
        drift=list(state.drift or []),
        drift_checked_at=state.drift_checked_at,
        drift_error=state.drift_error,
    )


def slurm_conf_suggestion() -> list[str]:
    """The slurm.conf priority lines the tiers' aging rules ask for (Arbiter never edits it).

    One query over the tiers (with their aging caps), not the effective rules of every
    project."""
    return slurm_conf_lines(PriorityTier.objects.select_related("aging_cap").order_by("-score"))


def applied_summary(cluster: Cluster) -> dict[str, list[tuple[str, dict[str, str]]]]:
    """The objects the last sync applied, per kind, sorted by name (for the cluster page)."""
    applied = sync_state(cluster).applied_state or {}
    return {kind: sorted(objects.items()) for kind, objects in applied.items()}


def pool_flavors(pools: list[Pool]) -> dict[int, dict[str, str]]:
    """Per pool, the GRES types of its flavors (capacities and quotas) → the flavor's name."""
    found: dict[int, dict[str, str]] = {pool.pk: {} for pool in pools}
    for model in (PoolCapacity, Quota):
        for pool_id, gres_type, name in model.objects.filter(pool__in=pools).values_list(
            "pool_id", "flavor__gres_type", "flavor__name"
        ):
            if gres_type:
                found[pool_id][gres_type.lower()] = name
    return found


def pool_gres_types(pools: list[Pool]) -> dict[int, list[str]]:
    return {pool_id: sorted(types) for pool_id, types in pool_flavors(pools).items()}
