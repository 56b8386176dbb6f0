"""Fractions of a GPU are kept: openb's ``gpu_milli`` (a pod sharing one GPU), the ingest API's
``gpus``, and every reader of a job's GPUs (GPU-hours, GPU-seconds lost, the job API, the
pages) uses the same fractional count."""

import csv
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Sum
from rest_framework.test import APIClient

from queues.models import EventKind, WorkloadEvent, WorkloadHour, WorkloadJob
from queues.selectors.workload import usage_over
from queues.services.workload import JobEvent, events_ingest
from queues.services.workload.rollup import workload_hours_roll_up
from tests.conftest import login

OPENB = Path(__file__).resolve().parent.parent / "fixtures" / "traces" / "openb_sample.csv"
START = datetime(2026, 1, 1, tzinfo=UTC)
T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


def openb_rows() -> list[dict[str, str]]:
    with OPENB.open(newline="") as handle:
        return list(csv.DictReader(handle))


def pod_gpus(row: dict[str, str]) -> float:
    return float(row["num_gpu"]) * float(row["gpu_milli"]) / 1000


def test_openb_keeps_a_shared_gpu_as_a_fraction_and_its_gpu_hours(world):
    rows = openb_rows()
    call_command(
        "import_trace",
        "--format",
        "alibaba-openb",
        str(OPENB),
        "--project-map",
        "*=vision",
        "--start",
        START.isoformat(),
        "--allow-unmapped",
        stdout=StringIO(),
    )
    stored = dict(WorkloadJob.objects.values_list("job_id", "gpus"))
    shared = [row for row in rows if row["num_gpu"] == "1" and row["gpu_milli"] != "1000"]
    assert len(shared) > 100  # the sample's GPU-sharing pods
    for row in rows:
        assert stored[row["name"]] == pytest.approx(pod_gpus(row)), row["name"]
    assert stored["openb-pod-0001"] == pytest.approx(0.46)
    # GPU-hours: each pod's fraction × its run time (scheduled → deletion), as in the file.
    workload_hours_roll_up(until=START + timedelta(days=200))
    expected = sum(
        pod_gpus(row) * (float(row["deletion_time"]) - float(row["scheduled_time"]))
        for row in rows
        if row["scheduled_time"]
    )
    whole = sum(
        float(row["num_gpu"]) * (float(row["deletion_time"]) - float(row["scheduled_time"]))
        for row in rows
        if row["scheduled_time"]
    )
    total = WorkloadHour.objects.aggregate(s=Sum("gpu_seconds"))["s"]
    assert total == pytest.approx(expected, rel=1e-6)
    assert total < whole * 0.95  # dropping the fractions would overstate them


def test_the_ingest_keeps_fractions_and_the_gpu_seconds_lost(world):
    events_ingest(
        events=[
            JobEvent(
                source="lab",
                event_id=f"e{n}",
                job_id="7",
                time=T0 + timedelta(minutes=minutes),
                kind=kind,
                gpus=0.25,
                project=world.vision,
            )
            for n, (kind, minutes) in enumerate(
                [(EventKind.SUBMITTED, 0), (EventKind.STARTED, 10), (EventKind.PREEMPTED, 70)]
            )
        ]
    )
    job = WorkloadJob.objects.get(job_id="7")
    assert job.gpus == 0.25 and job.gpu_count == 0.25
    assert job.gpu_seconds_lost == 900  # a quarter of a GPU for an hour
    assert WorkloadEvent.objects.filter(job=job, gpus=0.25).count() == 3
    # The approver's usage figure reads the same fraction (in SQL on PostgreSQL).
    used = usage_over(
        project=world.vision, since=T0 + timedelta(minutes=10), until=T0 + timedelta(minutes=70)
    )
    assert used["mean_gpus"] == 0.25


def api_item(**extra):
    return {
        "event_id": "f1",
        "source": "gke-1",
        "scheduler": "kueue",
        "job_id": "ns/share",
        "time": "2026-11-01T08:00:00Z",
        "kind": "submitted",
        "project": "vision",
        "gpus": 0.5,
        **extra,
    }


def test_the_api_takes_and_gives_fractions(world, ops):
    client = APIClient()
    client.force_authenticate(ops)
    response = client.post("/api/v1/workload-events/", {"events": [api_item()]}, format="json")
    assert response.status_code == 200, response.json()
    assert WorkloadJob.objects.get(job_id="ns/share").gpus == 0.5
    answer = client.get("/api/v1/jobs/ns/share/wait/", {"source": "gke-1"}).json()
    assert answer["gpus"] == 0.5
    page = login(ops).get("/jobs/wait/", {"job": "ns/share", "source": "gke-1"})
    assert "0.5 GPUs" in page.content.decode()


@pytest.mark.parametrize("gpus", [-0.5, "half", "NaN", 0.0001, 100_001])
def test_the_api_refuses_a_bad_gpu_count(world, ops, gpus):
    client = APIClient()
    client.force_authenticate(ops)
    response = client.post(
        "/api/v1/workload-events/", {"events": [api_item(gpus=gpus)]}, format="json"
    )
    assert response.status_code == 400
    assert "gpus" in response.json()["fields"]["events"][0]
    assert not WorkloadEvent.objects.exists()


def test_a_bad_gpu_count_in_a_trace_stores_nothing(world, tmp_path):
    trace = tmp_path / "openb.csv"
    trace.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        "deletion_time,scheduled_time\n"
        "a,1000,1024,1,500,,LS,Running,0,100,10\n"
        "b,1000,1024,-1,500,,LS,Running,0,100,10\n"
    )
    with pytest.raises(CommandError, match="line 3: GPUs must be a number of at least 0"):
        call_command(
            "import_trace", "--format", "alibaba-openb", str(trace), "--dry-run", stdout=StringIO()
        )
    assert not WorkloadJob.objects.exists()
