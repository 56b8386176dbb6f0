"""The migration that keys jobs by ``(source, key)``: a Slurm job recorded before it gets
``<id>@<submit epoch>`` and its events' ids follow (so the next collection finds them); any
other job is keyed by its id."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("queues", "0005_merge_workload_evidence")]
AFTER = [("queues", "0007_workload_job_key_unique")]
SUBMIT = datetime(2026, 11, 1, 8, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_existing_jobs_get_their_keys_and_slurm_events_follow():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    Cluster = old.get_model("queues", "Cluster")
    Job = old.get_model("queues", "WorkloadJob")
    Event = old.get_model("queues", "WorkloadEvent")
    lab = Cluster.objects.create(name="lab", backend="slurm", slurm_cluster="lab")
    common = {"state": "completed", "submitted_at": SUBMIT, "last_event_at": SUBMIT}
    slurm = Job.objects.create(source="lab", job_id="42", cluster=lab, **common)
    other = Job.objects.create(source="gke", job_id="ns/train", **common)
    for job, event_id in [(slurm, "42:submit"), (slurm, "42:end:1"), (other, "k1")]:
        Event.objects.create(
            job=job,
            source=job.source,
            event_id=event_id,
            time=SUBMIT,
            kind="submitted",
            state="pending",
        )
    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    Job = new.get_model("queues", "WorkloadJob")
    Event = new.get_model("queues", "WorkloadEvent")
    key = f"42@{int(SUBMIT.timestamp())}"
    assert Job.objects.get(pk=slurm.pk).key == key
    assert Job.objects.get(pk=other.pk).key == "ns/train"
    assert set(Event.objects.values_list("event_id", flat=True)) == {
        f"{key}:submit",
        f"{key}:end:1",
        "k1",
    }
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
