"""A rule change replayed against the rules in force (``docs/replay.md``, "On a change").

``change_replay_start`` stores a run for the change's inputs — the newest rules revision, the
change's edits and the workload window (the 30 whole days before today, UTC) — or returns
the run those same inputs already have; the task ``queues.tasks.change_replay`` then calls
``change_replay_run``, which replays the window's recorded jobs twice (the rules in force,
then with the change) and stores, per side, the rows the monthly review's queries read
(``ReplayWait``, ``ReplayHour``, ``ReplayPreemption``: ``queues.replay.results``) and the
capacity and quotas the side ran under; ``reports.selectors.change_replay`` runs the review's
queries over them.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Model
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import (
    RuleChange,
    RulesRevision,
)
from governance.models.changes import ChangeStatus
from governance.selectors import approval_problem
from governance.services import task_enqueue
from queues.models import (
    ChangeReplay,
    ReplayHour,
    ReplayPreemption,
    ReplaySide,
    ReplayStatus,
    ReplayWait,
)
from queues.replay import Result, replay
from queues.replay.engine import REASON_CATEGORY
from queues.replay.keys import ReplayIds, RulesRan
from queues.replay.results import hour_rows, preemption_rows

WINDOW_DAYS = 30
RESULT_FORMAT = 4
ROW_MODELS: tuple[type[Model], ...] = (ReplayWait, ReplayHour, ReplayPreemption)
REPLAYABLE = (ChangeStatus.DRAFT, ChangeStatus.PROPOSED)


def change_replay_window(*, now: datetime) -> tuple[datetime, datetime]:
    """The 30 whole days (UTC) before ``now``'s day: the same all day, so runs are reused."""
    end = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return end - timedelta(days=WINDOW_DAYS), end


def change_replay_inputs(*, change: RuleChange, now: datetime) -> dict[str, Any]:
    """What a replay of ``change`` reads: the rules revision, the edits, the window and each
    Slurm cluster's ``slurm.conf`` (a digest of its content: the Slurm model's settings)."""
    from queues.replay.adapt import slurm_conf_digests  # here: see ``_replay_both``

    start, end = change_replay_window(now=now)
    revision = RulesRevision.objects.order_by("-pk").values_list("pk", flat=True).first()
    edits = [
        [model, object_id, field, key, value]
        for model, object_id, field, key, value in change.edits.order_by("pk").values_list(
            "content_type__model", "object_id", "field", "key", "new_value"
        )
    ]
    return {
        # The result's format: 2 stores the replayed waits as rows (``ReplayWait``) for the
        # review's wait queries; 3 its hours and preemptions too (``ReplayHour``,
        # ``ReplayPreemption``); 4 each cluster's jobs through its scheduler's model (the
        # result's ``models``); a run of an older format is replayed again, not reused.
        "format": RESULT_FORMAT,
        "rules_revision": revision,
        "change": change.pk,
        "edits": edits,
        "start": start.isoformat(),
        "end": end.isoformat(),
        "slurm_conf": slurm_conf_digests(),
    }


def fingerprint(inputs: dict[str, Any]) -> str:
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def change_replay_start_problem(*, change: RuleChange, user: Any) -> str | None:
    """Why ``user`` may not start a replay of ``change``, or ``None``: the change's author or
    proposer, ops, and whoever may decide it may (a replay costs the worker minutes; readers
    see the stored runs)."""
    if getattr(user, "pk", None) in (change.author_id, change.proposed_by_id):
        return None
    if getattr(user, "is_ops", False) and not getattr(user, "is_service_account", False):
        return None
    if approval_problem(change=change, user=user) is None:
        return None
    return _(
        "Only the change's author, ops and the people who may decide it start its replay; the "
        "stored runs are readable by everyone who reads the change."
    )


def change_replay_start(
    *, change: RuleChange, user: Any, now: datetime | None = None
) -> tuple[ChangeReplay, bool]:
    """Queue a replay of ``change`` (draft or proposed); the same inputs reuse their run (a
    failed one is queued again). Returns the run and whether it was queued now."""
    now = now or timezone.now()
    problem = change_replay_start_problem(change=change, user=user)
    if problem is not None:
        raise PermissionDenied(problem)
    with transaction.atomic():
        change = RuleChange.objects.select_for_update().get(pk=change.pk)
        if change.status not in REPLAYABLE:
            raise ValidationError(
                {"change": _("Only a draft or proposed change can be replayed.")},
                code="not_replayable",
            )
        inputs = change_replay_inputs(change=change, now=now)
        key = fingerprint(inputs)
        run = ChangeReplay.objects.filter(change=change, fingerprint=key).first()
        if run is not None and run.status != ReplayStatus.FAILED:
            return run, False
        if run is None:
            run = ChangeReplay(change=change, fingerprint=key, inputs=inputs)
        run.status, run.progress, run.error, run.result = ReplayStatus.QUEUED, 0, "", None
        run.started_at = run.finished_at = None
        run.requested_by = user if getattr(user, "pk", None) else None
        run.full_clean()
        run.save()
        task_enqueue(task="queues.tasks.change_replay", args=(run.pk,))
    return run, True


def _advance(run: ChangeReplay, **fields: Any) -> None:
    for name, value in fields.items():
        setattr(run, name, value)
    run.full_clean()
    run.save(update_fields=list(fields))


def change_replay_run(*, replay_id: int) -> ChangeReplay | None:
    """Run a queued replay: safe to call twice (a finished run is left as it is)."""
    with transaction.atomic():
        run = ChangeReplay.objects.select_for_update().filter(pk=replay_id).first()
        if run is None or run.is_finished:
            return run
        _advance(run, status=ReplayStatus.RUNNING, progress=5, started_at=timezone.now())
    try:
        result, rows = _replay_both(run)
    except Exception as error:  # the run records why it failed; the worker goes on
        with transaction.atomic():
            _advance(
                run,
                status=ReplayStatus.FAILED,
                error=f"{type(error).__name__}: {error}"[:2000],
                finished_at=timezone.now(),
            )
        return run
    with transaction.atomic():
        # Derived rows, not governed ones: written in bulk, replaced as a whole.
        for model in ROW_MODELS:
            model._default_manager.filter(replay=run).delete()
            model._default_manager.bulk_create(
                [row for row in rows if isinstance(row, model)], batch_size=5000
            )
        _advance(
            run,
            status=ReplayStatus.DONE,
            progress=100,
            result=result,
            finished_at=timezone.now(),
        )
    return run


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def replay_hours(
    *, run: ChangeReplay, side: str, result: Result, ids: ReplayIds
) -> list[ReplayHour]:
    """The replay's hours as ``WorkloadHour`` holds the evidence's (``hour_rows``)."""
    rows = []
    for (hour, job_flavor, project, tier), values in sorted(hour_rows(result).items()):
        pool_id, flavor_id = ids.flavor(job_flavor)
        rows.append(
            ReplayHour(
                replay=run,
                side=side,
                hour=_at(hour),
                pool_id=pool_id,
                flavor_id=flavor_id,
                project_id=ids.project(project),
                tier_id=ids.tier(tier),
                gpu_seconds=values[0],
                quota_wait_seconds=values[1],
                resource_wait_seconds=values[2],
            )
        )
    return rows


def replay_preemptions(
    *, run: ChangeReplay, side: str, result: Result, ids: ReplayIds
) -> list[ReplayPreemption]:
    """The replay's preemptions as the review's preemption query sees the evidence's
    (``preemption_rows``)."""
    rows = []
    for at, gpus, project, tier, klass, job_flavor, run_from, restart in preemption_rows(result):
        rows.append(
            ReplayPreemption(
                replay=run,
                side=side,
                time=_at(at),
                gpus=gpus,
                project_id=ids.project(project),
                tier_id=ids.tier(tier),
                preemption_class_id=ids.preemption_class(klass),
                pool_id=ids.pool(job_flavor),
                run_from=_at(run_from),
                restart=None if restart is None else _at(restart),
            )
        )
    return rows


def _side_rows(run: ChangeReplay, side: str, result: Result, ids: ReplayIds) -> list[Model]:
    return [
        *replay_waits(run=run, side=side, result=result, ids=ids),
        *replay_hours(run=run, side=side, result=result, ids=ids),
        *replay_preemptions(run=run, side=side, result=result, ids=ids),
    ]


def replay_waits(
    *, run: ChangeReplay, side: str, result: Result, ids: ReplayIds
) -> list[ReplayWait]:
    """Each replayed job's first wait as a ``WorkloadWait`` would hold it: submitted at its
    arrival, ended at its first start (at its cancellation if it gave up waiting; empty if
    it had not started by the end), at the tier it ran at, in the category of the last reason
    it waited for (``REASON_CATEGORY``), in its flavor's pool."""
    last_reason: dict[int, str] = {}
    for j, since, token in result.reasons:
        start = result.start[j]
        if token and not (start == start and since >= start):  # before its first start
            last_reason[j] = token
    rows = []
    for j, job in enumerate(result.jobs):
        if job.arrival >= result.horizon:
            continue
        start = result.start[j]
        started = start == start and start <= result.horizon  # not NaN: it started
        wait_end: float | None = start if started else result.cancelled.get(j)
        pool_id, flavor_id = ids.flavor(job.flavor)
        submitted = _at(job.arrival)
        rows.append(
            ReplayWait(
                replay=run,
                side=side,
                submitted_at=submitted,
                day=submitted.date(),
                project_id=ids.project(job.project),
                tier_id=ids.tier(result.tiers[j]),
                flavor_id=flavor_id,
                pool_id=pool_id,
                category=REASON_CATEGORY.get(last_reason.get(j, ""), ""),
                wait_end=None if wait_end is None else _at(wait_end),
                started=started,
            )
        )
    return rows


def _replay_both(run: ChangeReplay) -> tuple[dict[str, Any], list[Model]]:
    # Here, not at the top: the adapter reads pools through queues.selectors, which imports
    # this package.
    from queues.replay.adapt import jobs_from_evidence, rules_timeline, rules_with_change
    from queues.replay.by_cluster import cluster_runs

    start = datetime.fromisoformat(run.inputs["start"])
    end = datetime.fromisoformat(run.inputs["end"])
    change = RuleChange.objects.get(pk=run.change_id)
    evidence = jobs_from_evidence(start=start, end=end)
    ids = ReplayIds.load()
    _advance(run, progress=20)
    in_force = rules_timeline(start=start, end=end)
    changed = [(at, rules_with_change(rules, change=change)) for at, rules in in_force]
    ignored = changed[0][1][1] if changed else []
    until = end.timestamp()
    timeline = [(at, rules) for at, (rules, _ignored) in changed]
    # Each cluster's jobs through the model of its scheduler (``queues.replay.by_cluster``).
    groups = cluster_runs(
        jobs=evidence.jobs,
        clusters=evidence.clusters,
        edits=run.inputs["edits"],
        sides=(in_force, timeline),
    )
    rows: list[Model] = []
    for side, rules, progress in (
        (ReplaySide.IN_FORCE, in_force, 55),
        (ReplaySide.WITH_CHANGE, timeline, 90),
    ):
        for group in groups:
            result = replay(group.jobs, rules, until=until, model=group.model_of(side))
            rows += _side_rows(run, side, result, ids)
        _advance(run, progress=progress)
    return {
        "start": run.inputs["start"],
        "end": run.inputs["end"],
        "jobs": len(evidence.jobs),
        "skipped_never_started": evidence.skipped_never_started,
        "skipped_no_flavor": evidence.skipped_no_flavor,
        "not_modelled": sorted(set(ignored)),
        "models": [group.as_json() for group in groups],
        "format": RESULT_FORMAT,
        ReplaySide.IN_FORCE.value: RulesRan.of(in_force).as_json(),
        ReplaySide.WITH_CHANGE.value: RulesRan.of(timeline).as_json(),
    }, rows
