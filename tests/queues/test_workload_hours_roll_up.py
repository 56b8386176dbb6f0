"""The hourly rollup of the workload evidence: split by hour, incremental, idempotent, late
evidence picked up within the look-back."""

from datetime import UTC, datetime, timedelta

import pytest

from queues import tasks
from queues.models import (
    EventKind,
    JobState,
    RollupState,
    WorkloadEvent,
    WorkloadHour,
    WorkloadJob,
    WorkloadWait,
)
from queues.services.workload.rollup import workload_hours_roll_up

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def _job(world, name: str, **fields) -> WorkloadJob:
    defaults = {"project": world.vision, "tier": world.key, "flavor": world.a100, "gpus": 4}
    return WorkloadJob.objects.create(
        source="test",
        job_id=name,
        key=name,
        last_event_at=fields.get("ended_at") or fields.get("started_at") or T0,
        **{**defaults, **fields},
    )


def _hours() -> dict[datetime, tuple[int, int]]:
    return {
        row.hour: (row.gpu_seconds, row.quota_wait_seconds)
        for row in WorkloadHour.objects.order_by("hour")
    }


@pytest.mark.django_db
def test_a_run_splits_jobs_into_hours_in_the_quota_pool(world):
    # Waits on quota 10:00–10:30, runs 10:30–12:15 on 4 GPUs.
    _job(world, "a", submitted_at=T0, started_at=T0 + timedelta(minutes=30),
         ended_at=T0 + timedelta(hours=2, minutes=15), state=JobState.COMPLETED,
         category="quota")  # fmt: skip
    counts = tasks.workload_hours_roll_up(until=(T0 + timedelta(hours=3)).isoformat())
    assert counts == {"jobs": 1, "changed": 1, "hours": 3, "waits": 1}
    assert _hours() == {
        T0: (4 * 1800, 1800),
        T0 + timedelta(hours=1): (4 * 3600, 0),
        T0 + timedelta(hours=2): (4 * 900, 0),
    }
    assert set(WorkloadHour.objects.values_list("pool__slug", flat=True)) == {"training"}
    assert RollupState.objects.get().watermark == T0 + timedelta(hours=3)


@pytest.mark.django_db
def test_open_jobs_grow_with_the_clock_and_late_evidence_is_caught(world):
    job = _job(world, "b", submitted_at=T0, started_at=T0, state=JobState.RUNNING)
    workload_hours_roll_up(until=T0 + timedelta(minutes=30))
    assert _hours() == {T0: (4 * 1800, 0)}
    workload_hours_roll_up(until=T0 + timedelta(minutes=45))
    assert _hours() == {T0: (4 * 2700, 0)}
    # The end (at 10:40) arrives late, with an event time before the watermark (10:45), but
    # within the look-back: the run is cut back to 40 minutes.
    job.ended_at, job.state, job.last_event_at = (
        T0 + timedelta(minutes=40),
        JobState.COMPLETED,
        T0 + timedelta(minutes=40),
    )
    job.save()
    workload_hours_roll_up(until=T0 + timedelta(hours=1))
    assert _hours() == {T0: (4 * 2400, 0)}
    # Nothing changes on a further run.
    assert workload_hours_roll_up(until=T0 + timedelta(hours=2))["changed"] == 0
    assert _hours() == {T0: (4 * 2400, 0)}


def wait_length(wait: WorkloadWait) -> float | None:
    """The wait's seconds, as the review derives them (while it waits: none)."""
    return None if wait.wait_end is None else (wait.wait_end - wait.submitted_at).total_seconds()


def _waits() -> dict[str, tuple]:
    return {
        row.job.job_id: (
            row.day,
            row.pool.slug if row.pool else None,
            row.project_id,
            row.tier_id,
            row.flavor_id,
            row.category,
            row.wait_end,
            wait_length(row),
        )
        for row in WorkloadWait.objects.select_related("job", "pool")
    }


def _event(job: WorkloadJob, kind: str, at: datetime, state: str, n: int) -> None:
    WorkloadEvent.objects.create(
        job=job, source="test", event_id=f"{job.job_id}-{n}", time=at, kind=kind, state=state
    )


@pytest.mark.django_db
def test_the_rollup_keeps_each_jobs_first_wait(world, ops):
    from queues import services as queue_services

    minutes = lambda n: T0 + timedelta(minutes=n)  # noqa: E731
    # Started after 30 min, in the quota pool of its flavor.
    _job(world, "ran", submitted_at=minutes(-30), started_at=T0, ended_at=minutes(60),
         state=JobState.COMPLETED, category="resource")  # fmt: skip
    # Preempted and requeued: its wait ends at its first start (an event), not at the restart.
    again = _job(world, "again", submitted_at=T0, started_at=minutes(50), ended_at=minutes(90),
                 state=JobState.COMPLETED, preemptions=1, requeues=1)  # fmt: skip
    for n, (kind, at, state) in enumerate(
        [
            (EventKind.STARTED, minutes(10), JobState.RUNNING),
            (EventKind.PREEMPTED, minutes(20), JobState.PREEMPTED),
            (EventKind.REQUEUED, minutes(20), JobState.PENDING),
            (EventKind.STARTED, minutes(50), JobState.RUNNING),
            (EventKind.ENDED, minutes(90), JobState.COMPLETED),
        ]
    ):
        _event(again, kind, at, state, n)
    # Cancelled while pending: its wait ends at its end. Submitted on the next UTC day.
    _job(world, "cancelled", submitted_at=T0 + timedelta(hours=14, minutes=30),
         ended_at=T0 + timedelta(hours=14, minutes=50), state=JobState.CANCELLED)  # fmt: skip
    # Still waiting, on an H100 (no quota of it: its cluster's pool).
    cluster = queue_services.cluster_create(
        user=ops, reason="A cluster for the inference pool.", name="hpc", slurm_cluster="hpc",
        pools=[world.inference],
    )  # fmt: skip
    waiting = _job(world, "waiting", submitted_at=T0, flavor=world.h100, cluster=cluster,
                   state=JobState.PENDING, category="quota")  # fmt: skip
    # Reported without a submit time: no wait, and no pool either.
    _job(world, "unknown", started_at=T0, ended_at=minutes(5), state=JobState.COMPLETED)

    counts = workload_hours_roll_up(until=T0 + timedelta(hours=15))
    assert counts["waits"] == 4
    vision, key, a100, h100 = world.vision.pk, world.key.pk, world.a100.pk, world.h100.pk
    day = T0.date()
    assert _waits() == {
        "ran": (day, "training", vision, key, a100, "resource", T0, 1800.0),
        "again": (day, "training", vision, key, a100, "", minutes(10), 600.0),
        "cancelled": (
            (T0 + timedelta(days=1)).date(),  # 00:30 UTC
            "training",
            vision,
            key,
            a100,
            "",
            T0 + timedelta(hours=14, minutes=50),
            1200.0,
        ),
        "waiting": (day, "inference", vision, key, h100, "quota", None, None),
    }
    # Nothing changed: nothing written again.
    assert workload_hours_roll_up(until=T0 + timedelta(hours=16))["waits"] == 0

    # The waiting job starts on a resource wait: its wait ends, its category follows the job.
    waiting.started_at, waiting.state, waiting.category = minutes(960), JobState.RUNNING, ""
    waiting.last_event_at = minutes(960)
    waiting.save()
    assert workload_hours_roll_up(until=T0 + timedelta(hours=17))["waits"] == 1
    assert _waits()["waiting"] == (day, "inference", vision, key, h100, "", minutes(960), 57600.0)
    # A job whose submit time is withdrawn (a corrected record) has no wait any more.
    WorkloadJob.objects.filter(job_id="ran").update(submitted_at=None, last_event_at=minutes(1000))
    assert workload_hours_roll_up(until=T0 + timedelta(hours=18))["waits"] == 1
    assert "ran" not in _waits()


@pytest.mark.django_db
def test_a_job_reported_late_with_old_times_is_still_counted(world):
    workload_hours_roll_up(until=T0 + timedelta(days=2))
    # Two days later, a collector catching up reports a job that ran on the first day: its
    # last event is far behind the watermark and its look-back, yet the next run reads it.
    _job(world, "late", submitted_at=T0, started_at=T0 + timedelta(minutes=30),
         ended_at=T0 + timedelta(hours=1), state=JobState.COMPLETED)  # fmt: skip
    counts = workload_hours_roll_up(until=T0 + timedelta(days=2, hours=1))
    assert (counts["jobs"], counts["changed"], counts["waits"]) == (1, 1, 1)
    assert _hours() == {T0: (4 * 1800, 0)}
    assert _waits()["late"][-1] == 1800.0
    # Read once: the following run has nothing to reread.
    assert workload_hours_roll_up(until=T0 + timedelta(days=2, hours=2))["jobs"] == 0


@pytest.mark.django_db
def test_a_run_without_a_watermark_writes_missing_waits_and_no_hours_twice(world):
    # What the migration that added the waits does: it clears the watermark, so the next run
    # rereads every job; their hours are already counted and stay as they are.
    _job(world, "a", submitted_at=T0, started_at=T0 + timedelta(minutes=30),
         ended_at=T0 + timedelta(hours=1), state=JobState.COMPLETED)  # fmt: skip
    workload_hours_roll_up(until=T0 + timedelta(hours=2))
    WorkloadWait.objects.all().delete()
    RollupState.objects.update(watermark=None)
    counts = workload_hours_roll_up(until=T0 + timedelta(hours=3))
    assert (counts["changed"], counts["waits"]) == (0, 1)
    assert _hours() == {T0: (4 * 1800, 0)}
    assert _waits()["a"][-1] == 1800.0


def _waited() -> dict[datetime, tuple[int, int]]:
    """Per hour: job-seconds waiting on quota, and for resources."""
    return {
        row.hour: (row.quota_wait_seconds, row.resource_wait_seconds)
        for row in WorkloadHour.objects.order_by("hour")
    }


def _resource_and_quota_jobs(world) -> None:
    # For resources 10:00–11:20, then runs 11:20–11:50; on quota 10:40–11:00; a dependency
    # wait (10:00–10:30) is neither.
    _job(world, "resource", submitted_at=T0, started_at=T0 + timedelta(minutes=80),
         ended_at=T0 + timedelta(minutes=110), state=JobState.COMPLETED,
         category="resource")  # fmt: skip
    _job(world, "quota", submitted_at=T0 + timedelta(minutes=40),
         started_at=T0 + timedelta(minutes=60), ended_at=T0 + timedelta(minutes=70),
         state=JobState.COMPLETED, category="quota")  # fmt: skip
    _job(world, "dependency", submitted_at=T0, started_at=T0 + timedelta(minutes=30),
         ended_at=T0 + timedelta(minutes=40), state=JobState.COMPLETED,
         category="dependency")  # fmt: skip


@pytest.mark.django_db
def test_the_rollup_counts_the_seconds_waiting_for_resources_once(world):
    _resource_and_quota_jobs(world)
    # Still waiting for resources since 11:30: counted up to the cut-off, then to the next.
    waiting = _job(world, "waiting", submitted_at=T0 + timedelta(minutes=90),
                   state=JobState.PENDING, category="resource")  # fmt: skip
    workload_hours_roll_up(until=T0 + timedelta(hours=2))
    assert _waited() == {T0: (1200, 3600), T0 + timedelta(hours=1): (0, 1200 + 1800)}
    # A re-run changes nothing (the waiting job is reread and contributes the same).
    assert workload_hours_roll_up(until=T0 + timedelta(hours=2))["changed"] == 0
    assert _waited() == {T0: (1200, 3600), T0 + timedelta(hours=1): (0, 1200 + 1800)}
    # The waiting job starts at 12:15: its wait moves on to 12:15, once.
    waiting.started_at = waiting.last_event_at = T0 + timedelta(hours=2, minutes=15)
    waiting.state = JobState.RUNNING
    waiting.save()
    workload_hours_roll_up(until=T0 + timedelta(hours=3))
    workload_hours_roll_up(until=T0 + timedelta(hours=3))
    assert _waited() == {
        T0: (1200, 3600),
        T0 + timedelta(hours=1): (0, 1200 + 1800),
        T0 + timedelta(hours=2): (0, 900),
    }


@pytest.mark.django_db
def test_contributions_stored_before_the_resource_wait_are_brought_in_once(world):
    """The state the migration that added ``resource_wait_seconds`` finds: hours without it,
    contributions without the key. After it (the watermark cleared), the next run adds each
    job's resource wait once, and leaves its GPU-seconds and quota wait as they were."""
    import importlib

    from django.apps import apps

    from queues.models import WorkloadJobRollup

    _resource_and_quota_jobs(world)
    workload_hours_roll_up(until=T0 + timedelta(days=1))
    fresh = {row.hour: row for row in WorkloadHour.objects.all()}
    expected = {hour: (r.gpu_seconds, *_waited()[hour]) for hour, r in fresh.items()}
    for stored in WorkloadJobRollup.objects.all():
        del stored.contribution["resource_wait"]
        stored.save()
    WorkloadHour.objects.update(resource_wait_seconds=0)
    # Without the migration, a job finished before the watermark (and its look-back) is never
    # reread.
    assert workload_hours_roll_up(until=T0 + timedelta(days=2))["jobs"] == 0
    assert {wait for _q, wait in _waited().values()} == {0}
    migration = importlib.import_module("queues.migrations.0025_hour_resource_wait")
    migration.reread_every_job(apps, None)
    assert RollupState.objects.get().watermark is None
    assert workload_hours_roll_up(until=T0 + timedelta(days=2))["changed"] == 3
    hours = {r.hour: (r.gpu_seconds, r.quota_wait_seconds, r.resource_wait_seconds)
             for r in WorkloadHour.objects.all()}  # fmt: skip
    assert hours == expected and expected[T0] == (4 * 600, 1200, 3600)
    assert workload_hours_roll_up(until=T0 + timedelta(days=2, hours=1))["jobs"] == 0
