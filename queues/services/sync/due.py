"""When a cluster's sync is due: queueing a sync (on a rules change, periodically), giving up a
retry that is no longer needed, and the out-of-sync alert."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import (
    RevisionTrigger,
    RulesRevision,
    SiteRole,
    User,
)
from governance.services import task_enqueue
from queues.models import (
    AlertKind,
    Cluster,
    SyncRun,
    SyncStatus,
    SyncTrigger,
)

from ..alerts import alert_close, alert_raise
from .state import _finish, _state, lease_seconds

TRIGGERS_FROM_REVISION = {
    RevisionTrigger.RULE_CHANGE: SyncTrigger.RULE_CHANGE,
    RevisionTrigger.GRANT_STARTED: SyncTrigger.GRANT,
    RevisionTrigger.GRANT_ENDED: SyncTrigger.GRANT,
    RevisionTrigger.MANUAL: SyncTrigger.MANUAL,
}


def sync_enqueue(*, cluster: Cluster, trigger: str, user: User | None = None) -> SyncRun:
    """Record a queued sync and send it to a worker once the transaction commits.

    A queued sync that has not started yet covers every later request: it reads the rules
    when it starts, so it is returned instead of a second one.
    """
    recent = timezone.now() - timedelta(seconds=lease_seconds())
    waiting = (
        SyncRun.objects.filter(cluster=cluster, status=SyncStatus.QUEUED, created_at__gte=recent)
        .exclude(trigger=SyncTrigger.DRY_RUN)
        .first()
    )
    if waiting is not None and trigger != SyncTrigger.DRY_RUN:
        return waiting
    run = SyncRun.objects.create(cluster=cluster, trigger=trigger, requested_by=user)
    task_enqueue(task="queues.tasks.sync_cluster", args=(run.pk,))
    return run


def sync_enqueue_for_revision(*, revision_id: int) -> list[SyncRun]:
    """``ARBITER_ON_RULES_CHANGED`` hook: a sync per enabled cluster after the rules change."""
    clusters = list(Cluster.objects.filter(enabled=True))
    if not clusters:
        return []
    revision = RulesRevision.objects.filter(pk=revision_id).first()
    trigger = TRIGGERS_FROM_REVISION.get(
        RevisionTrigger(revision.trigger) if revision else RevisionTrigger.MANUAL,
        SyncTrigger.RULE_CHANGE,
    )
    return [sync_enqueue(cluster=cluster, trigger=trigger) for cluster in clusters]


def sync_enqueue_due() -> list[SyncRun]:
    """Periodic: queue a sync for every enabled cluster whose rules are due, whose last sync
    failed, or where drift was found."""
    newest = RulesRevision.objects.order_by("-pk").values_list("pk", flat=True).first()
    runs = []
    for cluster in Cluster.objects.filter(enabled=True).select_related("sync_state"):
        state = _state(cluster)
        behind = newest is not None and (state.applied_revision_id or 0) < newest
        if behind or state.due_reason:
            runs.append(sync_enqueue(cluster=cluster, trigger=SyncTrigger.PERIODIC))
    return runs


def sync_is_due(*, cluster: Cluster) -> bool:
    """True while the cluster's applied revision is behind the newest rules revision, or
    its last sync failed, or drift was found (a failed sync is retried like any due one)."""
    state = _state(cluster)
    if state.due_reason:
        return True
    newest = RulesRevision.objects.order_by("-pk").values_list("pk", flat=True).first()
    if newest is None:
        return False
    return (state.applied_revision_id or 0) < newest


def sync_give_up(*, run: SyncRun) -> SyncRun:
    """A later sync applied the rules while this one waited to retry: nothing left to do.

    The run that applied them is named, and this one succeeds with it (the rules it was
    asked to apply are in force); only when no run can be found does it stop as failed."""
    state = _state(run.cluster)
    applier = (
        SyncRun.objects.filter(cluster=run.cluster, started_at__isnull=False)
        .exclude(pk=run.pk)
        .exclude(trigger=SyncTrigger.DRY_RUN)
        .filter(status__in=[SyncStatus.SUCCEEDED, SyncStatus.RUNNING])
        .filter(started_at__lte=state.applied_at or timezone.now())
        .order_by("-started_at", "-pk")
        .first()
        if state.applied_at is not None and not state.due_reason
        else None
    )
    if applier is not None:
        return _finish(
            run,
            status=SyncStatus.SUCCEEDED,
            error="",
            applied_by=applier.pk,
            note=str(
                _("The rules were already applied by sync run %(run)d.") % {"run": applier.pk}
            ),
        )
    return _finish(
        run,
        status=SyncStatus.FAILED,
        error=_(
            "Stopped retrying after %(attempts)d attempts: the rules are no longer due (%(error)s)"
        )
        % {"attempts": run.attempts, "error": run.error},
    )


def due_since(*, cluster: Cluster) -> datetime | None:
    """When the oldest rules revision the cluster has not applied was made (None: in sync)."""
    applied = _state(cluster).applied_revision_id or 0
    first = RulesRevision.objects.filter(pk__gt=applied).order_by("pk").first()
    return first.created_at if first else None


def out_of_sync_minutes() -> int:
    return int(getattr(settings, "ARBITER_OUT_OF_SYNC_MINUTES", 30))


def out_of_sync_close(*, cluster: Cluster) -> None:
    alert_close(kind=AlertKind.OUT_OF_SYNC, key=f"cluster:{cluster.pk}")


def out_of_sync_check(*, now: datetime | None = None) -> list[int]:
    """Periodic: alert ops (once) about clusters due longer than the threshold; close the
    alerts of clusters back in sync. Returns the ids of the clusters out of sync."""
    now = now or timezone.now()
    late = []
    ops = list(User.objects.filter(is_active=True, site_role=SiteRole.OPS))
    for cluster in Cluster.objects.filter(enabled=True):
        since = due_since(cluster=cluster)
        minutes = int((now - since).total_seconds() // 60) if since else 0
        if since is None or minutes < out_of_sync_minutes():
            if since is None:
                out_of_sync_close(cluster=cluster)
            continue
        last = SyncRun.objects.filter(cluster=cluster).exclude(error="").first()
        alert_raise(
            kind=AlertKind.OUT_OF_SYNC,
            key=f"cluster:{cluster.pk}",
            recipients=ops,
            cluster=cluster,
            details={
                "cluster": cluster.name,
                "minutes": minutes,
                "error": last.error if last else "",
            },
            now=now,
        )
        late.append(cluster.pk)
    return late
