"""Drift: the live objects compared with the last applied state, and removing a hand-made one."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import (
    User,
)
from queues.models import (
    Cluster,
    ClusterSyncState,
    SyncDueReason,
    SyncRun,
    SyncStatus,
    SyncTrigger,
)
from queues.schedulers.backends import (
    Ability,
    Action,
    Change,
    FieldChange,
    SchedulerBackend,
    SchedulerError,
)

from .backend import backend_for
from .due import sync_enqueue
from .state import _finish, _state


def drift_check(*, cluster: Cluster, backend: SchedulerBackend | None = None) -> ClusterSyncState:
    """Compare the live objects with the last applied state and store the differences."""
    backend = backend or backend_for(cluster)
    state = _state(cluster)
    state.drift_checked_at = timezone.now()
    try:
        live = backend.read_live()
    except SchedulerError as error:
        state.drift_error = str(error)
    else:
        state.drift_error = ""
        state.drift = [
            item.as_dict() for item in backend.drift(applied=state.applied_state, live=live)
        ]
        # Kueue: tell a Job waiting in a namespace Arbiter does not govern why (an Event).
        if backend.offers(Ability.FLAG_UNGOVERNED_JOBS):
            try:
                backend.flag_ungoverned_jobs(live=live)
            except SchedulerError as error:  # e.g. a permission the account lacks, named
                state.drift_error = str(error)
        # Drift in Arbiter's own objects makes the cluster due: the next sync restores them.
        # (Hand-made objects beside them are shown, never removed, so they do not.)
        own = {(k, n) for k, objects in (state.applied_state or {}).items() for n in objects}
        if any((item["kind"], item["name"]) in own for item in state.drift):
            if state.due_reason != SyncDueReason.FAILED:
                state.due_reason = SyncDueReason.DRIFT
        elif state.due_reason == SyncDueReason.DRIFT:
            state.due_reason = SyncDueReason.NONE
    state.save(update_fields=["drift", "drift_checked_at", "drift_error", "due_reason"])
    return state


def drift_check_all() -> list[ClusterSyncState]:
    """Periodic (every minute): check every enabled cluster that has been synced; where
    Arbiter's own objects drifted, queue the sync that restores them now, not at the next
    periodic sync."""
    states = []
    for cluster in Cluster.objects.filter(enabled=True, sync_state__applied_at__isnull=False):
        state = drift_check(cluster=cluster)
        if state.due_reason == SyncDueReason.DRIFT:
            sync_enqueue(cluster=cluster, trigger=SyncTrigger.PERIODIC)
        states.append(state)
    return states


def drift_remove(
    *,
    cluster: Cluster,
    kind: str,
    name: str,
    user: User,
    reason: str,
    backend: SchedulerBackend | None = None,
) -> SyncRun:
    """Delete one hand-made object that drift shows, because ops chose "remove" for it.

    Arbiter's own objects are not removed this way ("Sync now" restores them); the removal
    is recorded as a manual sync run with the object, who asked and why.
    """
    backend = backend or backend_for(cluster)
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": _("Say why this object is removed.")})
    if kind not in backend.kinds:
        raise ValidationError({"kind": _("Unknown kind of object: %(kind)s") % {"kind": kind}})
    state = _state(cluster)
    if name in (state.applied_state or {}).get(kind, {}):
        raise ValidationError(
            {"name": _("%(name)s is Arbiter's own: “Sync now” restores it.") % {"name": name}}
        )
    live = backend.read_live()
    if name not in live.objects.get(kind, {}):
        raise ValidationError({"name": _("%(name)s is not in the cluster.") % {"name": name}})
    change = Change(
        kind=kind,
        name=name,
        action=Action.DELETE,
        fields=tuple(FieldChange(f, v, "") for f, v in sorted(live.objects[kind][name].items())),
        note=reason[:500],
    )
    run = SyncRun.objects.create(
        cluster=cluster,
        trigger=SyncTrigger.MANUAL,
        requested_by=user,
        status=SyncStatus.RUNNING,
        started_at=timezone.now(),
        plan=[change.as_dict()],
    )
    try:
        applied = backend.apply(plan=[change], desired={}, progress=lambda text: None)
    except SchedulerError as error:
        return _finish(run, status=SyncStatus.FAILED, error=str(error), removed=f"{kind} {name}")
    drift_check(cluster=cluster, backend=backend)
    return _finish(
        run,
        status=SyncStatus.SUCCEEDED,
        removed=f"{kind} {name}",
        reason=reason[:500],
        writes=applied.writes,
        calls=backend.calls,
    )
