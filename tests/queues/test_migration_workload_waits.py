"""The migration that adds the jobs' first waits (``WorkloadWait``): the waits of the jobs
recorded before it exist after it (written by the migration on PostgreSQL, by the next
rollup's full reread elsewhere), exactly as the rollup itself computes them, and the rollup
then reads only the jobs added after it."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from queues.models import RollupState, WorkloadWait
from queues.services.workload.rollup import workload_hours_roll_up
from tests.queues.test_workload_hours_roll_up import wait_length

BEFORE = [("queues", "0014_workload_hour_review_index")]
AFTER = [("queues", "0015_workload_waits")]
T0 = datetime(2026, 11, 2, 9, 0, 0, 123456, tzinfo=UTC)


def _waits() -> dict[str, tuple]:
    return {
        row.job.job_id: (row.day, row.pool_id, row.category, row.wait_end, wait_length(row))
        for row in WorkloadWait.objects.select_related("job")
    }


@pytest.mark.django_db(transaction=True)
def test_the_jobs_recorded_before_get_their_waits():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    User = old.get_model("governance", "User")
    Flavor = old.get_model("governance", "GpuFlavor")
    Pool = old.get_model("governance", "Pool")
    Quota = old.get_model("governance", "Quota")
    Project = old.get_model("governance", "Project")
    Klass = old.get_model("governance", "PreemptionClass")
    Cluster = old.get_model("queues", "Cluster")
    Job = old.get_model("queues", "WorkloadJob")
    Event = old.get_model("queues", "WorkloadEvent")
    State = old.get_model("queues", "RollupState")
    User.objects.create(username="owner")
    a100 = Flavor.objects.create(slug="a100", name="A100", gpu_model="A100", memory_gb=80)
    h100 = Flavor.objects.create(slug="h100", name="H100", gpu_model="H100", memory_gb=80)
    training = Pool.objects.create(slug="training", name="Training")
    inference = Pool.objects.create(slug="inference", name="Inference")
    vision = Project.objects.create(slug="vision", name="Vision")
    klass = Klass.objects.create(slug="ok", name="OK", kind="allowed", business_impact="-")
    Quota.objects.create(project=vision, pool=training, flavor=a100, guarantee=8,
                         preemption_class=klass)  # fmt: skip
    hpc = Cluster.objects.create(name="hpc", backend="slurm", slurm_cluster="hpc")
    hpc.pools.add(inference)

    def job(name: str, **fields):
        fields = {"project": vision, "flavor": a100, "state": "completed", **fields}
        return Job.objects.create(source="test", job_id=name, key=name,
                                  last_event_at=T0 + timedelta(hours=3), **fields)  # fmt: skip

    job("ran", submitted_at=T0, started_at=T0 + timedelta(seconds=90.5),
        ended_at=T0 + timedelta(hours=1))  # fmt: skip
    again = job("again", submitted_at=T0, started_at=T0 + timedelta(hours=2),
                ended_at=T0 + timedelta(hours=3), preemptions=1, requeues=1)  # fmt: skip
    Event.objects.create(job=again, source="test", event_id="again-1", kind="started",
                         state="running", time=T0 + timedelta(minutes=7))  # fmt: skip
    job("cancelled", submitted_at=T0, ended_at=T0 + timedelta(minutes=20), state="cancelled",
        category="dependency")  # fmt: skip
    job("waiting", submitted_at=T0, flavor=h100, cluster=hpc, state="pending",
        category="quota")  # fmt: skip
    job("unknown", started_at=T0, ended_at=T0 + timedelta(hours=1))
    # A rollup had run before the migration.
    State.objects.create(name="workload_hours", watermark=T0 + timedelta(hours=4))

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    states = executor.loader.project_state(AFTER).apps.get_model("queues", "RollupState")
    watermark_after_waits = states.objects.get().watermark
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    newest = Job.objects.order_by("-pk").values_list("pk", flat=True).first()
    state = RollupState.objects.get()
    assert state.last_job_id == newest
    day = T0.date()
    expected = {
        "ran": (day, training.pk, "", T0 + timedelta(seconds=90.5), 90.5),
        "again": (day, training.pk, "", T0 + timedelta(minutes=7), 420.0),
        "cancelled": (day, training.pk, "dependency", T0 + timedelta(minutes=20), 1200.0),
        "waiting": (day, inference.pk, "quota", None, None),
    }
    if connection.vendor == "postgresql":
        # Written by the migration, and exactly what the rollup computes: its next run
        # (rereading every job) changes none of them.
        assert _waits() == expected
        assert watermark_after_waits == T0 + timedelta(hours=4)
        # A later migration (0025, the hours' resource wait) clears the watermark: the next
        # run rereads every job once.
        assert state.watermark is None
        assert workload_hours_roll_up(until=T0 + timedelta(hours=5))["waits"] == 0
    else:
        # The next rollup rereads every job and writes their waits.
        assert watermark_after_waits is None and state.watermark is None
        assert workload_hours_roll_up(until=T0 + timedelta(hours=5))["waits"] == 4
    assert _waits() == expected
