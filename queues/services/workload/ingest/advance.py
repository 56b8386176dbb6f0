"""One event applied to its job: the classifier's verdict, the contradictions refused, the
facts recorded, the state advanced."""

from __future__ import annotations

from datetime import datetime

from django.utils.translation import gettext as _

from queues.models import (
    EventKind,
    JobState,
)
from queues.schedulers.classify import KUEUE, Verdict, classify

from .rows import DESCRIPTIVE, FINISHED, Contradiction, JobEvent, JobRow, PositionFor


def _verdict(
    event: JobEvent,
    job: JobRow,
    position_for: PositionFor | None,
    verdicts: dict[tuple[str, str, str], Verdict],
) -> Verdict:
    if position_for and event.scheduler == KUEUE:  # depends on the project's position
        position = position_for(job)
        return classify(
            scheduler=event.scheduler, reason=event.reason, message=event.message, position=position
        )
    memo = (event.scheduler, event.reason, event.message)
    verdict = verdicts.get(memo)
    if verdict is None:
        verdict = verdicts[memo] = classify(
            scheduler=event.scheduler, reason=event.reason, message=event.message
        )
    return verdict


def _apply(
    job: JobRow,
    event: JobEvent,
    position_for: PositionFor | None,
    verdicts: dict[tuple[str, str, str], Verdict],
) -> Verdict | None:
    """Replay one event on the job; return the wait verdict of a pending event.

    Raises ``Contradiction`` (before changing anything) when the event cannot be true of
    the job as known: a start after the job ended, for instance a reused scheduler job id."""
    kind = event.kind
    current = event.time >= job.last_event_at
    if current and _late_submit(job, event):
        current = False  # the ended job's own submit, reported late: a fact, not a reopening
    if current:
        _refuse_contradiction(job, event)
    _record_facts(job, event)
    verdict = None
    if kind in (EventKind.SUBMITTED, EventKind.PENDING) and event.reason:
        verdict = _verdict(event, job, position_for, verdicts)
        if event.category:
            verdict = Verdict(event.category, verdict.clears_by_itself, verdict.reason)
    elif kind == EventKind.SUBMITTED and event.category:
        verdict = Verdict(event.category, None, "")
    if not current:
        return verdict  # an older event, kept in the log; the job already knows better
    _advance(job, event, verdict)
    return verdict


def _ended(job: JobRow) -> bool:
    return job.state in FINISHED and job.ended_at is not None


def _late_submit(job: JobRow, event: JobEvent) -> bool:
    """A ``submitted`` event of an ended job at (or before) its known submit: the job's own
    submission, reported after its end (a job cancelled the instant it was submitted)."""
    return (
        event.kind == EventKind.SUBMITTED
        and _ended(job)
        and job.submitted_at is not None
        and event.time <= job.submitted_at
    )


def _refuse_contradiction(job: JobRow, event: JobEvent) -> None:
    """Raise ``Contradiction`` when the (current) event would change an ended job: nothing at
    or after a job's end reopens or relabels it, whatever its kind (a start, a wait, a
    requeue, a suspension or preemption, another end). Only a repeat of the end itself (the
    same instant and state, under another id) passes, and changes nothing."""
    if not _ended(job) or job.ended_at is None or event.time < job.ended_at:
        return
    end = job.ended_at.isoformat()
    names = {"job": job.job_id, "state": JobState(job.state).label, "end": end}
    kind = event.kind
    if kind == EventKind.ENDED:
        if event.time == job.ended_at and (event.state or JobState.COMPLETED) == job.state:
            return
        raise Contradiction(
            _(
                "Job %(job)s had already ended (%(state)s at %(end)s): a second end cannot "
                "relabel it."
            )
            % names
        )
    if kind in (EventKind.STARTED, EventKind.RESUMED):
        raise Contradiction(
            _("Job %(job)s started after it had ended: a different job with the same id?") % names
        )
    if kind in (EventKind.SUBMITTED, EventKind.PENDING):
        raise Contradiction(
            _("Job %(job)s was reported waiting after it had ended: it cannot reopen.") % names
        )
    if kind == EventKind.REQUEUED:
        raise Contradiction(
            _("Job %(job)s was reported requeued after it had ended: it cannot reopen.") % names
        )
    raise Contradiction(
        _(
            "Job %(job)s was reported %(kind)s after it had ended (%(state)s at %(end)s): an "
            "ended job keeps its end."
        )
        % {**names, "kind": EventKind(kind).label.lower()}
    )


def _record_facts(job: JobRow, event: JobEvent) -> None:
    """What the event tells of the job itself (names, project, GPUs, times), whatever its age."""
    if not event.waits_known:
        job.waits_recorded = False  # the source cannot tell this job's wait
    for name in DESCRIPTIVE:
        value = getattr(event, name)
        if value:
            setattr(job, name, value[:500] if name == "constraints" else value[:200])
    if event.cluster is not None:
        job.cluster_id = event.cluster.pk
    if event.project is not None:
        job.project_id = event.project.pk
    if event.tier is not None:
        job.tier_id = event.tier.pk
    if event.flavor is not None:
        job.flavor_id = event.flavor.pk
    if event.pool is not None:
        job.pool_id = event.pool.pk
    if event.gpus is not None:
        job.gpus = event.gpus
    if event.submitted_at and (job.submitted_at is None or event.submitted_at < job.submitted_at):
        job.submitted_at = event.submitted_at
    if event.eligible_at:
        job.eligible_at = event.eligible_at


def _seconds(start: datetime | None, end: datetime) -> int:
    return max(0, int((end - start).total_seconds())) if start else 0


def _advance(job: JobRow, event: JobEvent, verdict: Verdict | None) -> None:
    """Move the job to the state a current event reports, with its waits and losses."""
    kind = event.kind
    job.last_event_at = event.time
    was = job.state
    if kind in (EventKind.SUBMITTED, EventKind.PENDING):
        if was != JobState.PENDING and kind == EventKind.PENDING:
            job.pending_since = event.time
        job.state = JobState.PENDING
        if job.pending_since is None:
            job.pending_since = job.submitted_at or event.time
        if verdict is not None:
            job.reason, job.message = verdict.reason or event.reason[:200], event.message
            job.category, job.clears_by_itself = verdict.category, verdict.clears_by_itself
    elif kind in (EventKind.STARTED, EventKind.RESUMED):
        if kind == EventKind.STARTED or job.started_at is None:
            job.started_at = event.time
        job.state = JobState.RUNNING
        job.pending_since = None  # reason and category stay: why it waited, last time
    elif kind == EventKind.SUSPENDED:
        job.state = JobState.SUSPENDED
    elif kind == EventKind.PREEMPTED:
        job.preemptions += 1
        if was == JobState.RUNNING:
            job.gpu_seconds_lost += round(job.gpus * _seconds(job.started_at, event.time))
        job.state = JobState.PREEMPTED
        job.reason, job.message = event.reason[:200], event.message
    elif kind == EventKind.REQUEUED:
        job.requeues += 1
        job.state = JobState.PENDING
        job.pending_since = event.time
        job.ended_at, job.exit_code = None, ""  # the run ended, the job did not
    elif kind == EventKind.ENDED:
        job.state = event.state or JobState.COMPLETED
        job.ended_at = event.time
        if job.started_at and job.ended_at < job.started_at:
            job.ended_at = job.started_at
        job.pending_since = None
        job.exit_code = event.exit_code[:32]
