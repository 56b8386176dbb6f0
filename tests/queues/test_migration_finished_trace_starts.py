"""The migration that gives Philly and ITP jobs imported before their start was recorded a
start at their submit: their rollups are reread once and their GPU-hours appear (they read as
0 before); jobs of other sources, and jobs that never ended, are left alone."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Sum

from queues.models import WorkloadHour, WorkloadJob
from queues.services.workload.rollup import workload_hours_roll_up

BEFORE = [("queues", "0026_replay_hours")]
AFTER = [("queues", "0028_finished_trace_jobs_start")]
T0 = datetime(2017, 10, 1, tzinfo=UTC)
END = T0 + timedelta(hours=10)


@pytest.mark.django_db(transaction=True)
def test_philly_and_itp_jobs_start_at_their_submit_and_are_reread():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    Job = old.get_model("queues", "WorkloadJob")

    def job(source: str, name: str, **times):
        return Job.objects.create(source=source, job_id=name, key=name, gpus=2,
                                  last_event_at=END, submitted_at=T0, waits_recorded=False,
                                  **times)  # fmt: skip

    job("trace:philly", "p", state="completed", ended_at=END)
    job("trace:itp", "i", state="completed", ended_at=END)
    job("hpc", "cancelled", state="cancelled", ended_at=END)
    workload_hours_roll_up(until=END + timedelta(hours=1))  # as before: no hour used
    assert not WorkloadHour.objects.filter(gpu_seconds__gt=0).exists()

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    started = WorkloadJob.objects.filter(started_at=T0)
    assert set(started.values_list("job_id", flat=True)) == {"p", "i"}
    assert WorkloadJob.objects.get(job_id="cancelled").started_at is None
    workload_hours_roll_up(until=END + timedelta(hours=2))
    used = WorkloadHour.objects.aggregate(s=Sum("gpu_seconds"))["s"]
    assert used == 2 * 2 * (END - T0).total_seconds()
