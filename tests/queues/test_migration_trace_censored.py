"""The migration that adds the ``censored`` state: the Alibaba trace jobs imported before it
and still open (running or waiting forever after the trace) are closed at their trace's
latest time, with their ``end`` event, and the next rollup takes their hours after the trace
back and stops rereading them; jobs of other sources are left alone."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Sum

from queues.models import JobState, WorkloadEvent, WorkloadHour, WorkloadJob
from queues.services.workload.rollup import workload_hours_roll_up

BEFORE = [("queues", "0018_change_replay")]
AFTER = [("queues", "0019_trace_censored")]
T0 = datetime(2026, 1, 1, tzinfo=UTC)
END = T0 + timedelta(hours=10)


@pytest.mark.django_db(transaction=True)
def test_the_open_trace_jobs_are_closed_at_the_traces_end():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    Job = old.get_model("queues", "WorkloadJob")
    Event = old.get_model("queues", "WorkloadEvent")

    def job(source: str, name: str, state: str, **times):
        made = Job.objects.create(source=source, job_id=name, key=name, state=state, gpus=2,
                                  last_event_at=T0, submitted_at=T0, **times)  # fmt: skip
        Event.objects.create(job=made, source=source, event_id=f"{name}:submit", kind="submitted",
                             state="pending", time=T0)  # fmt: skip
        return made

    source = "trace:alibaba-v2025"
    job(source, "runs", "running", started_at=T0)
    job(source, "waits", "pending")
    done = job(source, "done", "completed", started_at=T0, ended_at=END)
    Event.objects.create(job=done, source=source, event_id="done:end", kind="ended",
                         state="completed", time=END)  # fmt: skip
    job("hpc", "live", "running", started_at=T0)

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    closed = WorkloadJob.objects.filter(source=source, state=JobState.CENSORED)
    assert set(closed.values_list("job_id", "ended_at")) == {("runs", END), ("waits", END)}
    assert WorkloadEvent.objects.filter(state=JobState.CENSORED, time=END).count() == 2
    assert WorkloadJob.objects.get(job_id="live").state == JobState.RUNNING
    # The month after the trace: only the live cluster's job runs in it.
    later = END + timedelta(days=30)
    workload_hours_roll_up(until=later)
    after = WorkloadHour.objects.filter(hour__gte=END)
    assert after.aggregate(s=Sum("gpu_seconds"))["s"] == 2 * (later - END).total_seconds()
    assert workload_hours_roll_up(until=later + timedelta(days=1))["jobs"] == 1  # the live one
