"""Syncing the effective rules to a cluster: queue, run (one at a time), retry, drift.

A sync records a ``SyncRun`` as soon as it is asked for, so ops see it queued; the Celery
task ``queues.tasks.sync_cluster`` runs it. One sync at a time per cluster: a lease on the
cluster's ``ClusterSyncState`` row, taken under ``select_for_update`` and expiring after
``ARBITER_SYNC_LEASE_SECONDS``, so a crashed worker never blocks the cluster for good. When
the scheduler does not answer the task retries with exponential backoff; until a sync
succeeds the cluster's applied revision stays behind the newest ``RulesRevision``, which is
what "sync due" means, and the periodic task tries again.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Prefetch, prefetch_related_objects
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import Membership, PoolCapacity, RevisionTrigger, RulesRevision, User
from governance.selectors import effective_rules
from queues.models import (
    Cluster,
    ClusterBackend,
    ClusterSyncState,
    SyncRun,
    SyncStatus,
    SyncTrigger,
)

from .backends import (
    Action,
    ApplyResult,
    SchedulerBackend,
    SchedulerError,
    SchedulerUnavailable,
    State,
    named_jobs,
)
from .kueue import KueueBackend, KueueConnection
from .kueue.export import ExportResult, export_objects
from .slurm import SlurmBackend, SlurmCommands, backend_timeout


class SyncBusy(SchedulerError):
    """Another sync of the cluster holds the lease: try again later."""


TRIGGERS_FROM_REVISION = {
    RevisionTrigger.RULE_CHANGE: SyncTrigger.RULE_CHANGE,
    RevisionTrigger.GRANT_STARTED: SyncTrigger.GRANT,
    RevisionTrigger.GRANT_ENDED: SyncTrigger.GRANT,
    RevisionTrigger.MANUAL: SyncTrigger.MANUAL,
}


def backend_for(cluster: Cluster, *, force_conflicts: bool = False) -> SchedulerBackend:
    if cluster.backend == ClusterBackend.KUEUE:
        return KueueBackend(
            connection=KueueConnection.from_cluster(cluster), force_conflicts=force_conflicts
        )
    return SlurmBackend(
        cluster_name=cluster.slurm_cluster,
        commands=SlurmCommands(
            slurm_conf=cluster.slurm_conf,
            bin_dir=cluster.slurm_bin_dir,
            timeout=cluster.command_timeout or backend_timeout(),
        ),
    )


def sync_export(*, cluster: Cluster, directory: str, at: datetime | None = None) -> ExportResult:
    """Write the Kueue objects of ``cluster``'s pools into ``directory`` (GitOps): the same
    objects, validated the same way, as a sync of a Kueue cluster applies. Nothing is sent
    to any cluster, so a cluster of any backend can be exported."""
    target = Path(directory)
    if not target.is_dir():
        raise SchedulerError(_("The export directory %(dir)s does not exist.") % {"dir": directory})
    backend = KueueBackend(connection=KueueConnection.from_cluster(cluster))
    desired_state_for(cluster=cluster, backend=backend, at=at or timezone.now())
    if backend.objects is None:
        raise SchedulerError(_("Nothing was compiled for %(cluster)s.") % {"cluster": cluster})
    return export_objects(backend.objects, target)


def lease_seconds() -> int:
    return int(getattr(settings, "ARBITER_SYNC_LEASE_SECONDS", 900))


def retry_delay(retries: int) -> int:
    """Exponential backoff: 10 s, 20 s, 40 s, ... capped at 10 minutes."""
    return int(min(10 * 2**retries, 600))


# --- queueing ------------------------------------------------------------------------------------


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
    from queues import tasks  # the task module imports the services

    transaction.on_commit(lambda: tasks.sync_cluster.delay(run.pk))
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
    """Periodic: queue a sync for every enabled cluster whose rules are due."""
    newest = RulesRevision.objects.order_by("-pk").values_list("pk", flat=True).first()
    runs = []
    for cluster in Cluster.objects.filter(enabled=True).select_related("sync_state"):
        state = _state(cluster)
        if newest is not None and (state.applied_revision_id or 0) < newest:
            runs.append(sync_enqueue(cluster=cluster, trigger=SyncTrigger.PERIODIC))
    return runs


# --- the lease ----------------------------------------------------------------------------------


def _state(cluster: Cluster) -> ClusterSyncState:
    state, _created = ClusterSyncState.objects.get_or_create(cluster=cluster)
    return state


@transaction.atomic
def lease_acquire(*, cluster: Cluster, now: datetime | None = None) -> str:
    now = now or timezone.now()
    _state(cluster)
    state = ClusterSyncState.objects.select_for_update().get(cluster=cluster)
    if state.lease_token and state.lease_expires_at and state.lease_expires_at > now:
        raise SyncBusy(
            _("Another sync of %(cluster)s is running (lease until %(until)s).")
            % {"cluster": cluster, "until": state.lease_expires_at.isoformat(timespec="seconds")}
        )
    state.lease_token = uuid.uuid4().hex
    state.lease_expires_at = now + timedelta(seconds=lease_seconds())
    state.save(update_fields=["lease_token", "lease_expires_at"])
    return state.lease_token


@transaction.atomic
def lease_release(*, cluster: Cluster, token: str) -> None:
    state = ClusterSyncState.objects.select_for_update().get(cluster=cluster)
    if state.lease_token == token:
        state.lease_token = ""
        state.lease_expires_at = None
        state.save(update_fields=["lease_token", "lease_expires_at"])


# --- running ------------------------------------------------------------------------------------


def desired_state_for(*, cluster: Cluster, backend: SchedulerBackend, at: datetime) -> State:
    """The desired state of ``cluster`` from the effective rules at ``at``."""
    rules = effective_rules(at=at)
    prefetch_related_objects(list(rules.tiers), "preemptible_tiers")
    prefetch_related_objects(
        [project.project for project in rules.projects.values()],
        Prefetch("memberships", queryset=Membership.objects.select_related("user")),
    )
    pools = list(cluster.pools.all())
    capacities = {
        (capacity.pool_id, capacity.flavor_id): capacity.gpus
        for capacity in PoolCapacity.objects.filter(pool__in=pools)
    }
    return backend.desired_state(rules=rules, pools=pools, capacities=capacities)


def _progress(run: SyncRun, text: str) -> None:
    run.progress = str(text)[:200]
    run.save(update_fields=["progress"])


def _finish(run: SyncRun, *, status: str, error: str = "", **result: Any) -> SyncRun:
    run.status = status
    run.error = error
    run.result = {**run.result, **result}
    run.finished_at = timezone.now()
    run.progress = ""
    run.save()
    return run


def sync_execute(
    *, run: SyncRun, backend: SchedulerBackend | None = None, now: datetime | None = None
) -> SyncRun:
    """Run one queued sync (or dry run): plan, apply, verify; record everything on ``run``.

    Raises ``SchedulerUnavailable`` or ``SyncBusy`` (after recording them) so that the task
    retries; any other scheduler error fails the run.
    """
    cluster = run.cluster
    backend = backend or backend_for(cluster)
    now = now or timezone.now()
    run.status = SyncStatus.RUNNING
    run.attempts += 1
    run.started_at = timezone.now()
    run.error = ""
    run.save()
    token = ""
    try:
        if not run.is_dry_run:
            token = lease_acquire(cluster=cluster)
        _progress(run, _("reading the rules"))
        revision = RulesRevision.objects.order_by("-pk").first()
        desired = desired_state_for(cluster=cluster, backend=backend, at=now)
        _progress(run, _("reading the live state"))
        applied_state = _state(cluster).applied_state or {}
        live = backend.read_live(jobs=named_jobs(desired=desired, applied=applied_state))
        desired, skipped = backend.settle(desired=desired, live=live, applied=applied_state)
        plan = backend.plan(desired=desired, live=live) + skipped
        run.plan = [change.as_dict() for change in plan]
        run.revision = revision
        run.save(update_fields=["plan", "revision"])
        writes = [change for change in plan if change.is_write]
        conflicts = sum(change.action == Action.CONFLICT for change in plan)
        if run.is_dry_run:
            return _finish(
                run,
                status=SyncStatus.SUCCEEDED,
                changes=len(writes),
                conflicts=conflicts,
                skipped_jobs=len(skipped),
                calls=backend.calls,
                writes=0,
            )
        applied = ApplyResult()
        if writes:
            applied = backend.apply(
                plan=writes, desired=desired, progress=lambda text: _progress(run, text)
            )
        _progress(run, _("verifying"))
        remaining = backend.verify(desired=desired) if writes else []
        if remaining:
            return _finish(
                run,
                status=SyncStatus.FAILED,
                error=_("Read-back found %(count)d objects that differ from the plan: %(names)s")
                % {
                    "count": len(remaining),
                    "names": ", ".join(f"{c.kind} {c.name}" for c in remaining[:10]),
                },
                changes=len(writes),
                writes=applied.writes,
                calls=backend.calls,
                remaining=[change.as_dict() for change in remaining],
            )
        state = _state(cluster)
        state.applied_revision = revision
        state.applied_state = desired
        state.applied_at = timezone.now()
        state.drift = []
        state.drift_checked_at = state.applied_at
        state.drift_error = ""
        state.save()
        return _finish(
            run,
            status=SyncStatus.SUCCEEDED,
            changes=len(writes),
            conflicts=conflicts,
            skipped_jobs=len(skipped),
            writes=applied.writes,
            calls=backend.calls,
            warnings=applied.warnings,
        )
    except (SchedulerUnavailable, SyncBusy) as error:
        run.status = SyncStatus.RETRYING
        run.error = str(error)
        run.progress = ""
        run.save()
        raise
    except SchedulerError as error:
        return _finish(run, status=SyncStatus.FAILED, error=str(error), calls=backend.calls)
    finally:
        if token:
            lease_release(cluster=cluster, token=token)


def sync_give_up(*, run: SyncRun) -> SyncRun:
    """The retries are spent: the run fails, and the rules stay due for the periodic sync."""
    return _finish(
        run,
        status=SyncStatus.FAILED,
        error=_("Gave up after %(attempts)d attempts: %(error)s")
        % {"attempts": run.attempts, "error": run.error},
    )


def sync_now(
    *,
    cluster: Cluster,
    user: User | None,
    dry_run: bool = False,
    backend: SchedulerBackend | None = None,
    force_conflicts: bool = False,
) -> SyncRun:
    """Run a sync (or dry run) here and now, as the command line and dry runs do.

    ``force_conflicts`` (Kueue): take over fields another field manager owns, overwriting
    hand-made changes; otherwise those objects are reported as conflicts and left alone.
    """
    backend = backend or backend_for(cluster, force_conflicts=force_conflicts)
    run = SyncRun.objects.create(
        cluster=cluster,
        trigger=SyncTrigger.DRY_RUN if dry_run else SyncTrigger.MANUAL,
        requested_by=user,
    )
    try:
        return sync_execute(run=run, backend=backend)
    except (SchedulerUnavailable, SyncBusy):
        return _finish(run, status=SyncStatus.FAILED, error=run.error)


# --- drift --------------------------------------------------------------------------------------


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
    state.save(update_fields=["drift", "drift_checked_at", "drift_error"])
    return state


def drift_check_all() -> list[ClusterSyncState]:
    """Periodic: check every enabled cluster that has been synced."""
    return [
        drift_check(cluster=cluster)
        for cluster in Cluster.objects.filter(enabled=True, sync_state__applied_at__isnull=False)
    ]
