"""The approver's workload evidence (``project_workload_summary``) read from the rollup
(``WorkloadWait``, ``WorkloadHour``) gives the figures the raw jobs give (``recent_waits``,
``usage_over``), on varied history read by the rollup in part, and its queries do not grow
with the project's jobs."""

import random
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from queues.models import EventKind, JobState, WaitCategory
from queues.selectors import project_workload_summary
from queues.selectors.workload import recent_waits, usage_over
from queues.services.workload import JobEvent, events_ingest
from queues.services.workload.rollup import workload_hours_roll_up

NOW = timezone.now().astimezone(UTC).replace(minute=37, second=11, microsecond=0)
SINCE = NOW.replace(minute=0, second=0) - timedelta(days=30)
REASONS = ["Resources", "AssocGrpGRES", "Priority", "QOSMaxGRESPerUser", "Dependency"]


def history(world, *, jobs: int, seed: int, preempt: bool) -> list[JobEvent]:
    """``jobs`` jobs of vision over 35 days: waited for various reasons, started, run and
    ended, cancelled while pending, still pending, still running; some preempted and
    restarted (``preempt``)."""
    rng = random.Random(seed)
    keys = {"project": world.vision, "flavor": world.a100, "tier": world.key}
    events = []
    for n in range(jobs):
        job = f"{seed}-{n}"

        def at(seconds: int) -> datetime:
            return NOW - timedelta(seconds=seconds)

        submitted = rng.randrange(60, 35 * 86400)
        wait = rng.choice([0, 30, 600, 7200, 86400 * 2])
        run = rng.choice([60, 3600, 86400, 86400 * 4])
        fate = rng.choice(["done", "done", "done", "cancelled", "running", "pending"])

        def event(kind, seconds, suffix="", job=job, **extra):
            events.append(
                JobEvent(
                    source="hpc",
                    event_id=f"{job}:{kind}{suffix}",
                    job_id=job,
                    time=at(seconds),
                    kind=kind,
                    **extra,
                )
            )

        event(EventKind.SUBMITTED, submitted, gpus=rng.choice([1, 2, 8, 0.5]), **keys)
        event(EventKind.PENDING, submitted - 1, reason=rng.choice(REASONS))
        start = submitted - wait
        if fate == "pending" or start <= 0:
            continue
        if fate == "cancelled":
            event(EventKind.ENDED, start, state=JobState.CANCELLED)
            continue
        event(EventKind.STARTED, start)
        if preempt and n % 3 == 0 and start - 600 > 0:
            event(EventKind.PREEMPTED, start - 300)
            event(EventKind.REQUEUED, start - 300)
            event(EventKind.STARTED, start - 600, suffix="again")
            start -= 600
        end = start - run
        if fate == "done" and end > 0:
            event(EventKind.ENDED, end, state=JobState.COMPLETED)
    return events


def ingest_with_rollup_between(events: list[JobEvent], *, rolled_at: datetime) -> None:
    """The events up to ``rolled_at``, the rollup run then, then the rest (the rollup has
    read part of the history, not what came after its watermark)."""
    events = sorted(events, key=lambda e: e.time)
    events_ingest(events=[e for e in events if e.time <= rolled_at])
    workload_hours_roll_up(until=rolled_at)
    later = [e for e in events if e.time > rolled_at]
    if later:
        events_ingest(events=later)


def raw_waits(world) -> dict:
    waits = recent_waits(project_ids=[world.vision.pk], since=SINCE, now=NOW)[world.vision.pk]
    return {c.value: waits[c.value] for c in WaitCategory if c.value in waits}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_summary_from_the_rollup_gives_the_raw_jobs_figures(world, seed):
    events = history(world, jobs=80, seed=seed, preempt=False)
    ingest_with_rollup_between(events, rolled_at=NOW - timedelta(hours=10, minutes=13))
    summary = project_workload_summary(project=world.vision, at=NOW)
    assert {w["category"]: {k: w[k] for k in w if k not in ("category", "label")}
            for w in summary["waits"]} == raw_waits(world)  # fmt: skip
    assert summary["usage"] == usage_over(project=world.vision, since=SINCE, until=NOW)
    assert summary["usage"]["gpu_hours"] > 0


@pytest.mark.parametrize("seed", [4, 5])
def test_preempted_jobs_waits_are_their_first_waits_from_the_rollup_too(world, seed):
    """Preempted and restarted jobs: the wait rows hold the first start, as the raw jobs'
    first ``started`` event gives it."""
    events = history(world, jobs=60, seed=seed, preempt=True)
    ingest_with_rollup_between(events, rolled_at=NOW - timedelta(days=3, minutes=5))
    summary = project_workload_summary(project=world.vision, at=NOW)
    waits = {w["category"]: {k: w[k] for k in w if k not in ("category", "label")}
             for w in summary["waits"]}  # fmt: skip
    assert waits == raw_waits(world)


def test_before_the_rollup_first_runs_the_jobs_are_read(world):
    events_ingest(events=history(world, jobs=30, seed=6, preempt=True))
    summary = project_workload_summary(project=world.vision, at=NOW)
    waits = {w["category"]: {k: w[k] for k in w if k not in ("category", "label")}
             for w in summary["waits"]}  # fmt: skip
    assert waits == raw_waits(world)
    assert summary["usage"] == usage_over(project=world.vision, since=SINCE, until=NOW)


@override_settings(ARBITER_ROLLUP_LOOKBACK_HOURS=0)
def test_without_look_back_the_hours_after_the_watermark_are_read_from_the_jobs(world):
    events = history(world, jobs=60, seed=7, preempt=False)
    ingest_with_rollup_between(events, rolled_at=NOW - timedelta(hours=30, minutes=1))
    summary = project_workload_summary(project=world.vision, at=NOW)
    assert summary["usage"] == usage_over(project=world.vision, since=SINCE, until=NOW)
    waits = {w["category"]: {k: w[k] for k in w if k not in ("category", "label")}
             for w in summary["waits"]}  # fmt: skip
    assert waits == raw_waits(world)


def test_the_summary_costs_the_same_queries_whatever_the_history(world):
    """Pinned: the rollup's state (read once), the project's flavors' use, the jobs the
    rollup has not read (one query), their first starts, the waits' rows, the hours' rows,
    the GPU-seconds after the watermark and the job counts (pending and running only). A
    month of busy history costs no more."""
    rolled_at = NOW - timedelta(hours=9)
    ingest_with_rollup_between(history(world, jobs=10, seed=8, preempt=True), rolled_at=rolled_at)
    with CaptureQueriesContext(connection) as small:
        project_workload_summary(project=world.vision, at=NOW)
    ingest_with_rollup_between(history(world, jobs=200, seed=9, preempt=True), rolled_at=rolled_at)
    with CaptureQueriesContext(connection) as large:
        project_workload_summary(project=world.vision, at=NOW)
    assert len(large) == PINNED, [q["sql"][:150] for q in large.captured_queries]
    # The first starts are read only when a job not yet read was preempted.
    assert len(small) in (PINNED - 1, PINNED)


PINNED = 12
