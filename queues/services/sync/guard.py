"""The guard: untyped GPU jobs that got past the job_submit plugin, held and alerted."""

from __future__ import annotations

from governance.models import (
    SiteRole,
    User,
)
from queues.models import (
    AlertKind,
    Cluster,
)
from queues.schedulers.backends import (
    Ability,
    SchedulerBackend,
    SchedulerError,
)

from ..alerts import alert_raise
from .backend import backend_for
from .due import sync_is_due
from .state import _state
from .submit import submit_refresh


def guard_check(
    *, cluster: Cluster, backend: SchedulerBackend | None = None
) -> list[dict[str, str]]:
    """Hold pending, and requeue-and-hold running, untyped GPU jobs that got past the
    job_submit plugin and a project's quota; raise an alert per action (see ``slurm.guard``).

    Works from the last applied state; a cluster never synced, or not reachable, is left
    alone (the next run tries again). Returns the actions.
    """
    state = _state(cluster)
    if not state.applied_state:
        return []
    backend = backend or backend_for(cluster)
    if not backend.offers(Ability.GUARD):  # the scheduler itself holds every limit
        return []
    # The table's expiry is renewed only while the rules are applied: a cluster whose sync
    # keeps failing ends with a plugin that refuses governed GPU jobs (fails safe).
    submit_refresh(cluster=cluster, backend=backend, write=not sync_is_due(cluster=cluster))
    try:
        actions = backend.guard(applied=state.applied_state)
        # Each capped tier's cap, split over its QOS, follows where the jobs wait.
        if backend.offers(Ability.REBALANCE):
            backend.rebalance(applied=state.applied_state)
    except SchedulerError:
        return []
    if actions:
        ops = list(User.objects.filter(is_active=True, site_role=SiteRole.OPS))
        for item in actions:
            alert_raise(
                kind=AlertKind.GUARD_ACTION,
                key=f"guard:{cluster.pk}:{item['job']}",
                recipients=ops,
                cluster=cluster,
                details={"cluster": cluster.name, **item},
            )
    return actions


def guard_check_all() -> dict[str, int]:
    """Periodic: the guard on every enabled cluster that has been synced."""
    return {
        cluster.name: len(guard_check(cluster=cluster))
        for cluster in Cluster.objects.filter(enabled=True, sync_state__applied_at__isnull=False)
    }
