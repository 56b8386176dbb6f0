"""The hourly rollup of the workload evidence: split by hour, incremental, idempotent, late
evidence picked up within the look-back."""

from datetime import UTC, datetime, timedelta

import pytest

from queues import tasks
from queues.models import JobState, RollupState, WorkloadHour, WorkloadJob
from queues.services.workload.rollup import workload_hours_roll_up

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def _job(world, name: str, **fields) -> WorkloadJob:
    return WorkloadJob.objects.create(
        source="test",
        job_id=name,
        project=world.vision,
        tier=world.key,
        flavor=world.a100,
        gpus=4,
        last_event_at=fields.get("ended_at") or fields.get("started_at") or T0,
        **fields,
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
