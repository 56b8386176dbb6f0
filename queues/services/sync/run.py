"""Running one sync: plan, apply, verify, and record the applied state."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import (
    RulesRevision,
    User,
)
from governance.selectors import effective_rules
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
    ApplyResult,
    Change,
    SchedulerBackend,
    SchedulerError,
    SchedulerUnavailable,
    State,
    gc_paused,
    ledger_of,
    named_jobs,
    own_objects,
)

from .backend import backend_for, desired_state_for
from .due import out_of_sync_close
from .preflight import _scheduler_config, cluster_preflight, enforcement_for
from .state import SyncBusy, _finish, _mark_due, _progress, _state, lease_acquire, lease_release
from .submit import submit_refresh


@dataclass
class _Planned:
    """What a sync found to do: the desired state, its writes and conflicts, and the checks."""

    desired: State
    writes: list[Change]
    conflicts: list[Change]
    refused: list[str]
    summary: dict[str, Any]
    sync_state: ClusterSyncState
    ledger: dict[str, list[str]]


def _sync_plan(*, run: SyncRun, backend: SchedulerBackend, now: datetime) -> _Planned:
    """Read the rules and the live state, and plan (stored on ``run``)."""
    cluster = run.cluster
    _progress(run, _("reading the rules"))
    revision = RulesRevision.objects.order_by("-pk").first()
    # Read once: the desired state and the enforcement rows compile the same rules.
    with gc_paused():
        rules = effective_rules(at=now)
    desired = desired_state_for(cluster=cluster, backend=backend, at=now, rules=rules)
    _progress(run, _("checking what the cluster tracks"))
    refused = cluster_preflight(cluster=cluster, backend=backend)
    # One ``scontrol show config`` for the plugin check and the priority settings.
    config = _scheduler_config(backend)
    submit_refresh(
        cluster=cluster,
        backend=backend,
        write=False,
        plugins=None if config is None else config.get("JobSubmitPlugins", ""),
    )
    enforcement = enforcement_for(
        cluster=cluster, backend=backend, at=now, rules=rules, config=config
    )
    _progress(run, _("reading the live state"))
    sync_state = _state(cluster)
    applied_state = sync_state.applied_state or {}
    ledger = sync_state.ledger or ledger_of(applied_state)
    live = backend.read_live(jobs=named_jobs(desired=desired, applied=applied_state))
    # Only Arbiter's own objects may change: marked ones it wants or created before.
    live = own_objects(live=live, desired=desired, ledger=ledger)
    desired, skipped = backend.settle(desired=desired, live=live, applied=applied_state)
    plan = backend.plan(desired=desired, live=live) + skipped
    run.plan = [change.as_dict() for change in plan]
    run.revision = revision
    run.save(update_fields=["plan", "revision"])
    writes = [change for change in plan if change.is_write]
    conflicts = [change for change in plan if change.action == Action.CONFLICT]
    summary = {
        "changes": len(writes),
        "conflicts": len(conflicts),
        "skipped_jobs": len(skipped),
        "enforcement": enforcement,
        "preflight": refused,
    }
    return _Planned(desired, writes, conflicts, refused, summary, sync_state, ledger)


def _names_reserve(planned: _Planned) -> None:
    """The names go into the ledger before they exist: a sync that stops halfway leaves
    objects the next one recognises as its own."""
    kinds = ledger_of(planned.desired)
    created = [c for c in planned.writes if c.action == Action.CREATE and c.kind in kinds]
    if not created:
        return
    ledger = planned.ledger
    for change in created:
        ledger.setdefault(change.kind, [])
        if change.name not in ledger[change.kind]:
            ledger[change.kind].append(change.name)
    planned.sync_state.ledger = ledger
    planned.sync_state.save(update_fields=["ledger"])


def _unfinished(*, backend: SchedulerBackend, planned: _Planned) -> list[Change]:
    """What the read-back still finds different from the plan after the writes."""
    if not planned.writes:
        return []
    ours = {kind: set(names) for kind, names in planned.ledger.items()}
    return [
        change
        for change in backend.verify(desired=planned.desired)
        # A hand-made object under Arbiter's accounts is drift, not an unfinished write.
        if change.action != Action.DELETE or change.name in ours.get(change.kind, set())
    ]


def _applied_record(
    *,
    cluster: Cluster,
    backend: SchedulerBackend,
    planned: _Planned,
    revision: RulesRevision | None,
) -> dict[tuple[str, str], str]:
    """Store what the sync applied (less its conflicts) as the baseline for drift; answer
    the deleted objects a finalizer still holds (name → why)."""
    state = _state(cluster)
    conflicts = planned.conflicts
    clashing = {(c.kind, c.name) for c in conflicts}
    state.applied_state = {
        kind: {n: f for n, f in objects.items() if (kind, n) not in clashing}
        for kind, objects in planned.desired.items()
    }
    state.ledger = ledger_of(state.applied_state)
    # Deleted objects a finalizer still holds stay Arbiter's: the next sync looks again.
    held = dict(backend.held) if backend.offers(Ability.HELD_DELETES) else {}
    for kind, name in sorted(held):
        state.ledger.setdefault(kind, []).append(name)
    state.applied_at = timezone.now()
    state.drift = []
    state.drift_checked_at = state.applied_at
    state.drift_error = ""
    if not conflicts:
        # With conflicts the rules stay due: the next sync tries again.
        state.applied_revision = revision
        state.due_reason = SyncDueReason.NONE
    state.save()
    if not conflicts:
        out_of_sync_close(cluster=cluster)
    return held


def _unwritten_finish(*, run: SyncRun, backend: SchedulerBackend, planned: _Planned) -> SyncRun:
    """Finish a run that writes nothing: a dry run, or a cluster that cannot hold the rules
    as it is configured (the preflight refused them; the rules stay due)."""
    if planned.refused:
        if not run.is_dry_run:
            _mark_due(run.cluster, SyncDueReason.FAILED)
        status, error = SyncStatus.FAILED, " ".join(planned.refused)
    else:
        conflicts = planned.conflicts
        status = SyncStatus.NEEDS_ATTENTION if conflicts else SyncStatus.SUCCEEDED
        error = _conflict_advice(conflicts)
    return _finish(
        run, status=status, error=error, **planned.summary, calls=backend.calls, writes=0
    )


def _unfinished_finish(
    *,
    run: SyncRun,
    backend: SchedulerBackend,
    planned: _Planned,
    applied: ApplyResult,
    remaining: list[Change],
) -> SyncRun:
    """Fail a run whose read-back still differs from the plan, naming the first objects."""
    return _finish(
        run,
        status=SyncStatus.FAILED,
        error=_("Read-back found %(count)d objects that differ from the plan: %(names)s")
        % {
            "count": len(remaining),
            "names": ", ".join(f"{c.kind} {c.name}" for c in remaining[:10]),
        },
        **planned.summary,
        writes=applied.writes,
        calls=backend.calls,
        remaining=[change.as_dict() for change in remaining],
    )


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
        planned = _sync_plan(run=run, backend=backend, now=now)
        if planned.refused or run.is_dry_run:
            return _unwritten_finish(run=run, backend=backend, planned=planned)
        summary, conflicts = planned.summary, planned.conflicts
        applied = ApplyResult()
        if planned.writes:
            _names_reserve(planned)
            applied = backend.apply(
                plan=planned.writes,
                desired=planned.desired,
                progress=lambda text: _progress(run, text),
            )
        _progress(run, _("verifying"))
        remaining = _unfinished(backend=backend, planned=planned)
        if remaining:
            return _unfinished_finish(
                run=run, backend=backend, planned=planned, applied=applied, remaining=remaining
            )
        held = _applied_record(
            cluster=cluster, backend=backend, planned=planned, revision=run.revision
        )
        clashes = [c for c in conflicts if (c.kind, c.name) not in held]
        # A capped tier's cap, split over its QOS, goes where jobs wait (a raised cap too).
        if backend.offers(Ability.REBALANCE):
            backend.rebalance(applied=planned.desired)
        submit = submit_refresh(cluster=cluster, backend=backend, write=True, recheck=False)
        warnings = list(applied.warnings)
        if submit.get("error"):
            warnings.append(submit["error"])
        return _finish(
            run,
            status=SyncStatus.NEEDS_ATTENTION if conflicts or held else SyncStatus.SUCCEEDED,
            error=" ".join(filter(None, [_conflict_advice(clashes), *held.values()])),
            **summary,
            writes=applied.writes,
            calls=backend.calls,
            warnings=warnings,
            submit_plugin=submit,
        )
    except (SchedulerUnavailable, SyncBusy) as error:
        if isinstance(error, SchedulerUnavailable) and not run.is_dry_run:
            _mark_due(cluster, SyncDueReason.FAILED)
        run.status = SyncStatus.RETRYING
        run.error = str(error)
        run.progress = ""
        run.save()
        raise
    except SchedulerError as error:
        if not run.is_dry_run:
            _mark_due(cluster, SyncDueReason.FAILED)
        return _finish(run, status=SyncStatus.FAILED, error=str(error), calls=backend.calls)
    finally:
        if token:
            lease_release(cluster=cluster, token=token)


def _conflict_advice(conflicts: list) -> str:
    if not conflicts:
        return ""
    return str(
        _(
            "%(count)d objects were left alone because someone else made or changed them "
            "(%(names)s). Each one's note in the plan says what to do: rename or remove a "
            "hand-made object in the scheduler, adopt its value by a rule change, or overwrite "
            "it; then sync again. The rules stay due until then."
        )
        % {
            "count": len(conflicts),
            "names": ", ".join(f"{c.kind} {c.name}" for c in conflicts[:10]),
        }
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

    ``force_conflicts`` (Kueue): apply every object forced. A plain sync already takes back
    the fields of Arbiter's own objects (and says from whom); objects Arbiter did not make are
    conflicts either way, left alone.
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
        # The rules stay due: the periodic sync and the out-of-sync alert take over.
        return _finish(run, status=SyncStatus.FAILED, error=run.error)
