"""``import_trace``: a trace's jobs without an end are closed at the trace's end (state
``censored``), so the time after the trace holds no invented GPU-hours, and the rollup does
not reread them on every run; instances that existed before the trace are not new waits."""

import csv
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Sum

from queues.models import (
    ACTIVE_STATES,
    JobState,
    WorkloadEvent,
    WorkloadHour,
    WorkloadJob,
    WorkloadWait,
)
from queues.selectors.definitions import job_wait
from queues.services.workload.rollup import workload_hours_roll_up
from reports import services

TRACES = Path(__file__).resolve().parent.parent / "fixtures" / "traces"
V2025 = TRACES / "v2025_sample.csv"
START = datetime(2026, 1, 1, tzinfo=UTC)
V2025_HEADER = (
    "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,"
    "rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,"
    "creation_time,scheduled_time,deletion_time\n"
)


def run(*args: str) -> str:
    out = StringIO()
    call_command(
        "import_trace", *args, "--start", START.isoformat(), "--allow-unmapped", stdout=out
    )
    return out.getvalue()


def number(value: str) -> float | None:
    return float(value) if value.strip() else None


def v2025_rows(path: Path = V2025) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def latest(rows: list[dict[str, str]]) -> float:
    times = ("creation_time", "scheduled_time", "deletion_time")
    return max(float(row[name]) for row in rows for name in times if row[name].strip())


def test_jobs_without_an_end_are_closed_at_the_traces_end(world):
    rows = v2025_rows()
    end = latest(rows)
    run("--format", "alibaba-v2025", str(V2025), "--tier-map", "LS=production")
    jobs = WorkloadJob.objects.filter(source="trace:alibaba-v2025")
    open_in_file = [row for row in rows if number(row["deletion_time"]) is None]
    assert len(open_in_file) == 83
    censored = jobs.filter(state=JobState.CENSORED)
    assert censored.count() == len(open_in_file)
    assert set(censored.values_list("job_id", flat=True)) == {
        row["instance_sn"] for row in open_in_file
    }
    assert set(censored.values_list("ended_at", flat=True)) == {START + timedelta(seconds=end)}
    assert not jobs.filter(state__in=ACTIVE_STATES).exists()
    # Each closing is in the event log, like any end.
    assert WorkloadEvent.objects.filter(state=JobState.CENSORED).count() == len(open_in_file)


def test_the_month_after_the_trace_holds_no_gpu_hours_and_no_job_is_reread(world):
    rows = v2025_rows()
    end = START + timedelta(seconds=latest(rows))
    run("--format", "alibaba-v2025", str(V2025), "--tier-map", "LS=production")
    first = workload_hours_roll_up(until=end + timedelta(days=31))
    assert first["jobs"] == len(rows)
    after = WorkloadHour.objects.filter(hour__gte=end).aggregate(s=Sum("gpu_seconds"))["s"]
    assert after is None
    # The GPU-seconds are the file's own: GPUs × (deletion, or the trace's end, − scheduled;
    # an instance that existed before the trace from its start).
    expected = 0.0
    for row in rows:
        began = number(row["scheduled_time"]) or number(row["creation_time"]) or 0.0
        finished = number(row["deletion_time"])
        finished = latest(rows) if finished is None else finished
        expected += float(row["gpu_request"]) * (finished - began)
    stored = WorkloadHour.objects.aggregate(s=Sum("gpu_seconds"))["s"]
    assert stored == pytest.approx(expected, abs=len(rows))  # whole seconds per hour row
    # Closed jobs leave the set every run rereads: a month later, nothing is reread.
    again = workload_hours_roll_up(until=end + timedelta(days=62))
    assert again["jobs"] == 0 and again["hours"] == 0


def test_instances_that_existed_before_the_trace_are_not_new_waits(world):
    rows = v2025_rows()
    run("--format", "alibaba-v2025", str(V2025), "--tier-map", "LS=production")
    workload_hours_roll_up(until=START + timedelta(days=40))
    existed = {row["instance_sn"] for row in rows if number(row["creation_time"]) is None}
    assert len(existed) == 72
    jobs = WorkloadJob.objects.filter(source="trace:alibaba-v2025")
    assert set(jobs.filter(waits_recorded=False).values_list("job_id", flat=True)) == existed
    assert not WorkloadWait.objects.filter(job__job_id__in=existed).exists()
    assert WorkloadWait.objects.count() == len(rows) - len(existed)


def test_a_job_still_waiting_at_the_end_is_censored_there_not_never_started(ops, world, tmp_path):
    trace = tmp_path / "v2025.csv"
    trace.write_text(
        V2025_HEADER
        + "waits,HN,app_0,1,1,1,1,0,0,1,1,1,1,-1,100,,\n"
        + "ran,HN,app_0,1,1,2,2,0,0,1,1,1,1,-1,0,50,3600\n"
    )
    run("--format", "alibaba-v2025", str(trace), "--tier-map", "LS=production")
    job = WorkloadJob.objects.get(job_id="waits")
    assert job.state == JobState.CENSORED
    assert job.ended_at == START + timedelta(seconds=3600)
    assert job.started_at is None
    # Asked long after the trace, its wait is known up to the trace's end: still waiting.
    wait = job_wait(job, now=START + timedelta(days=90))
    assert wait is not None
    assert wait.ongoing and not wait.never_started and not wait.started
    assert wait.seconds == 3500
    workload_hours_roll_up(until=START + timedelta(days=90))
    row = WorkloadWait.objects.get(job=job)
    assert row.censored and row.wait_end == job.ended_at
    assert not WorkloadWait.objects.get(job__job_id="ran").censored
    # The review counts it as still waiting at the end, its wait up to the trace's end.
    review = services.review_build(
        review_id=services.review_request(user=ops, start=START, end=START + timedelta(days=90)).pk
    )
    (row,) = review.metrics["waits"]["by_tier"]
    assert (row["jobs"], row["waiting_at_end"], row["max"]) == (2, 1, 3500)


def test_a_later_end_closes_the_open_jobs_there(world, tmp_path):
    trace = tmp_path / "v2025.csv"
    trace.write_text(V2025_HEADER + "a,HN,app_0,1,1,1,1,0,0,1,1,1,1,-1,0,10,\n")
    end = START + timedelta(days=31)
    run("--format", "alibaba-v2025", str(trace), "--end", end.isoformat())
    assert WorkloadJob.objects.get(job_id="a").ended_at == end


@pytest.mark.parametrize(
    "line, args, message",
    [
        (
            "a,HN,app_0,1,1,1,1,0,0,1,1,1,1,-1,0,10,7200\n",
            ["--end", "2026-01-01T01:00:00Z"],
            "after the trace's end",
        ),
        (
            "a,HN,app_0,1,1,1,1,0,0,1,1,1,1,-1,0,10,\n",
            ["--end", "2025-12-31T00:00:00Z"],
            "before its start",
        ),
        ("a,HN,app_0,1,1,1,1,0,0,1,1,1,1,-1,0,10,\n", ["--end", "soon"], "ISO 8601"),
        ("a,HN,app_0,1,1,1,1,0,0,1,1,1,1,-1,0,100,50\n", [], "deleted before"),
        # Times no trace holds: the trace's end cannot be placed after --start.
        ("a,HN,app_0,1,1,1,1,0,0,1,1,1,1,-1,0,10,inf\n", [], "line 2: deletion_time inf is not"),
        ("a,HN,app_0,1,1,1,1,0,0,1,1,1,1,-1,0,10,1e15\n", [], "line 2: .*days after the trace"),
    ],
)
def test_a_bad_end_is_a_clear_error_and_stores_nothing(world, tmp_path, line, args, message):
    trace = tmp_path / "v2025.csv"
    trace.write_text(V2025_HEADER + line)
    with pytest.raises(CommandError, match=message):
        run("--format", "alibaba-v2025", str(trace), *args)
    assert not WorkloadEvent.objects.exists() and not WorkloadJob.objects.exists()
