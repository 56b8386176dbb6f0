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
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import prefetch_related_objects
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import (
    PoolCapacity,
    RevisionTrigger,
    RulesRevision,
    SiteRole,
    User,
)
from governance.selectors import EffectiveRules, effective_rules
from queues.models import (
    AlertKind,
    Cluster,
    ClusterBackend,
    ClusterSyncState,
    SubmitTableDelivery,
    SyncDueReason,
    SyncRun,
    SyncStatus,
    SyncTrigger,
)
from queues.schedulers.backends import (
    Action,
    ApplyResult,
    Change,
    FieldChange,
    SchedulerBackend,
    SchedulerError,
    SchedulerUnavailable,
    State,
    gc_paused,
    ledger_of,
    named_jobs,
    own_objects,
)
from queues.selectors.clusters import pool_flavors, pool_gres_types

from .alerts import alert_close, alert_raise
from .kueue import KueueBackend, KueueConnection
from .kueue.export import ExportResult, export_objects
from .slurm import SlurmBackend, commands_for
from .slurm.enforcement import rule_enforcement
from .submit_table import submit_table_expiry_check


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
    tracked_tres = getattr(backend, "tracked_tres", None)
    if tracked_tres is None:  # not Slurm: the backend's own validation covers it
        return []
    pools = list(cluster.pools.all()) if pools is None else list(pools)
    tracked = tracked_tres()
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


def _unoffered_gres(*, cluster: Cluster, pools: list, backend: Any) -> list[str]:
    """Flavors whose GRES type no node of the cluster offers (``sinfo``), with the node lines
    that would offer it: a quota on them could never run, so nothing is written."""
    node_gres = getattr(backend, "node_gres", None)
    if node_gres is None:
        return []
    nodes = node_gres()
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
    kueue_enforcement = getattr(backend, "rule_enforcement", None)
    if kueue_enforcement is not None:
        return list(kueue_enforcement(rules=rules, pools=pools))
    priority_config = getattr(backend, "priority_config", None)
    if priority_config is None:
        return []
    try:
        priorities = priority_config(config=config)
    except SchedulerError:
        priorities = {}
    return rule_enforcement(
        rules=rules,
        pools=pools,
        gres_types=pool_gres_types(pools),
        priority_config=priorities,
        plugin=_state(cluster).submit_plugin,
    )


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
    held: dict[tuple[str, str], str] = getattr(backend, "held", {})
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
        rebalance = getattr(backend, "rebalance", None)
        if rebalance is not None:
            rebalance(applied=planned.desired)
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


def _mark_due(cluster: Cluster, reason: str) -> None:
    """Keep the cluster due (a failed sync, drift) until a sync succeeds."""
    state = _state(cluster)
    if state.due_reason != SyncDueReason.FAILED:  # a failure outranks drift
        state.due_reason = reason
        state.save(update_fields=["due_reason"])


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


# --- out of sync ------------------------------------------------------------------------------


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
        # Kueue: tell a Job waiting in a namespace Arbiter does not govern why (an Event).
        flag = getattr(backend, "flag_ungoverned_jobs", None)
        if callable(flag):
            try:
                flag(live=live)
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


def _scheduler_config(backend: SchedulerBackend) -> dict[str, str] | None:
    """Slurm's settings in one call; None when not Slurm or not read (then each check
    reads, and reports, for itself)."""
    read = getattr(backend, "scheduler_config", None)
    if read is None:
        return None
    try:
        return read()
    except SchedulerError:
        return None


def submit_refresh(
    *,
    cluster: Cluster,
    backend: SchedulerBackend,
    write: bool,
    recheck: bool = True,
    plugins: str | None = None,
) -> dict[str, Any]:
    """Write the job_submit plugin's table from the applied state (when ``write``) and record
    whether the plugin is installed and current (see ``slurm.submit``). Not Slurm: nothing.
    A table that cannot be written is reported, never raised: the plugin
    then fails safe once the old table expires. ``plugins``: JobSubmitPlugins as just read."""
    table = getattr(backend, "submit_table", None)
    status_of = getattr(backend, "submit_status", None)
    state = _state(cluster)
    if table is None or status_of is None:
        return {}
    status: dict[str, Any] = {}
    fields = ["submit_plugin", "submit_plugin_checked_at"]
    if write and state.applied_state:
        try:
            written = table(applied=state.applied_state)
            # A pulled table: its bytes are kept, as rendered, for the pull agent (the API).
            if "text" in written:
                state.submit_table = written.pop("text")
                fields.append("submit_table")
            status["written"] = written
        except OSError as error:
            status["error"] = str(
                _("The job_submit plugin's table could not be written: %(error)s")
                % {"error": error}
            )
    # ``recheck=False``: JobSubmitPlugins as this sync read it a moment ago (one call less).
    if plugins is None and not recheck:
        plugins = (state.submit_plugin or {}).get("plugins")
    try:
        status.update(
            status_of(applied=state.applied_state, plugins=plugins, agent=state.agent_fetch)
        )
    except SchedulerError as error:
        status["check_error"] = str(error)
    state.submit_plugin = status
    state.submit_plugin_checked_at = timezone.now()
    state.save(update_fields=fields)
    submit_table_expiry_check(cluster=cluster, status=status)
    return status


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
    guard = getattr(backend, "guard", None)
    if guard is None:  # not Slurm: the scheduler itself holds every limit
        return []
    # The table's expiry is renewed only while the rules are applied: a cluster whose sync
    # keeps failing ends with a plugin that refuses governed GPU jobs (fails safe).
    submit_refresh(cluster=cluster, backend=backend, write=not sync_is_due(cluster=cluster))
    try:
        actions = guard(applied=state.applied_state)
        # Each capped tier's cap, split over its QOS, follows where the jobs wait.
        rebalance = getattr(backend, "rebalance", None)
        if rebalance is not None:
            rebalance(applied=state.applied_state)
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
