"""Job identity: Slurm reuses job ids after its state is reset; a requeued job keeps its id
but gets a new submit time. The collector tells the two apart, and no contradictory record
ever stops an ingest.

Slurm cannot be made to reuse an id on demand (it takes wiping slurmctld's state), so these
tests replay the text ``squeue -o`` / ``sacct -P`` print through ``collect_cluster`` with a
stand-in for the commands; the live collector is tested in ``test_workload_slurm.py``.
"""

from datetime import UTC, datetime, timedelta

import pytest

from queues import services
from queues.models import EventKind, JobState, WorkloadEvent, WorkloadJob
from queues.services.workload import JobEvent, collect_cluster, events_ingest
from queues.services.workload.slurm import slurm_time
from tests.conftest import REASON


class Replay:
    """Answers ``squeue`` and ``sacct`` with recorded text (one answer per collection)."""

    def __init__(self, squeue: str, sacct: str) -> None:
        self.squeue, self.sacct = squeue, sacct

    def run(self, args: list[str], **_: object) -> str:
        return self.squeue if args[0] == "squeue" else self.sacct


def squeue_row(job, state, reason, account, submit, start="N/A"):
    return (
        f"{job}|{state}|{reason}|{account}|normal|alice|gpu|gres/gpu:a100:2|1|(null)|"
        f"{submit}|{start}|train"
    )


def sacct_row(job, state, account, submit, start, end, reason="None"):
    return (
        f"{job}|{state}|{reason}|{account}|normal|alice|gpu|billing=2,gres/gpu:a100=2|"
        f"|{submit}|{submit}|{start}|{end}|0:0|1|train"
    )


@pytest.fixture
def cluster(ops, world):
    return services.cluster_create(
        user=ops, reason=REASON, name="lab", slurm_cluster="lab", pools=[world.training]
    )


def epoch(text):
    return int(slurm_time(text).timestamp())


def test_a_reused_slurm_job_id_after_a_reset_is_a_new_job(cluster):
    account = "training.vision"
    first = collect_cluster(
        cluster=cluster,
        commands=Replay(
            "",
            sacct_row(
                "42",
                "COMPLETED",
                account,
                "2026-11-01T08:00:00",
                "2026-11-01T08:05:00",
                "2026-11-01T09:00:00",
            ),
        ),
        now=datetime(2026, 11, 1, 10, tzinfo=UTC),
    )
    assert first.ok and first.ingest.rejected == 0
    # slurmctld's state was reset: job ids start again, and 42 is someone else's job now.
    second = collect_cluster(
        cluster=cluster,
        commands=Replay(
            squeue_row(
                "42", "RUNNING", "None", account, "2026-11-01T10:10:00", "2026-11-01T10:20:00"
            ),
            sacct_row(
                "42",
                "COMPLETED",
                account,
                "2026-11-01T08:00:00",
                "2026-11-01T08:05:00",
                "2026-11-01T09:00:00",
            ),
        ),
        now=datetime(2026, 11, 1, 11, tzinfo=UTC),
    )
    assert second.ok and second.ingest.rejected == 0
    jobs = list(WorkloadJob.objects.filter(job_id="42").order_by("submitted_at"))
    assert [job.key for job in jobs] == [
        f"42@{epoch('2026-11-01T08:00:00')}",
        f"42@{epoch('2026-11-01T10:10:00')}",
    ]
    assert [job.state for job in jobs] == [JobState.COMPLETED, JobState.RUNNING]
    assert jobs[0].ended_at == slurm_time("2026-11-01T09:00:00")
    assert jobs[1].started_at == slurm_time("2026-11-01T10:20:00") and jobs[1].ended_at is None
    assert all(job.project and job.project.slug == "vision" for job in jobs)


def test_a_requeued_job_stays_one_job_though_slurm_resets_its_submit_time(cluster):
    account = "training.vision"
    result = collect_cluster(
        cluster=cluster,
        commands=Replay(
            squeue_row("43", "PENDING", "BeginTime", account, "2026-11-01T09:00:00"),
            "\n".join(
                [
                    sacct_row(
                        "43",
                        "NODE_FAIL",
                        account,
                        "2026-11-01T08:00:00",
                        "2026-11-01T08:05:00",
                        "2026-11-01T09:00:00",
                    ),
                    sacct_row(
                        "43", "PENDING", account, "2026-11-01T09:00:00", "Unknown", "Unknown"
                    ),
                ]
            ),
        ),
        now=datetime(2026, 11, 1, 10, tzinfo=UTC),
    )
    assert result.ok and result.ingest.rejected == 0
    job = WorkloadJob.objects.get(job_id="43")
    assert job.key == f"43@{epoch('2026-11-01T08:00:00')}"
    assert (job.state, job.requeues) == (JobState.PENDING, 1)


T0 = datetime(2026, 11, 1, 8, tzinfo=UTC)


def ev(n, kind, minutes, job="9", **extra):
    return JobEvent(
        source="api",
        event_id=f"x{n}",
        job_id=job,
        time=T0 + timedelta(minutes=minutes),
        kind=kind,
        **extra,
    )


def test_contradictory_or_malformed_events_are_rejected_and_counted_never_raised(world):
    result = events_ingest(
        events=[
            ev(1, EventKind.SUBMITTED, 0, project=world.vision, gpus=2),
            ev(2, EventKind.STARTED, 5),
            ev(3, EventKind.ENDED, 60, state=JobState.COMPLETED),
            # The same id again, later: a different job the source did not tell apart.
            ev(4, EventKind.STARTED, 120),
            ev(5, EventKind.STARTED, 10, job="10").__class__(
                source="api",
                event_id="x5",
                job_id="10",
                time=datetime(2026, 11, 1, 8),
                kind=EventKind.STARTED,
            ),
        ]
    )
    assert (result.received, result.stored, result.rejected) == (5, 3, 2)
    assert {error["event_id"] for error in result.errors} == {"x4", "x5"}
    job = WorkloadJob.objects.get(job_id="9")
    assert job.state == JobState.COMPLETED and job.ended_at == T0 + timedelta(minutes=60)
    assert not WorkloadEvent.objects.filter(event_id__in=["x4", "x5"]).exists()
    assert not WorkloadJob.objects.filter(job_id="10").exists()


def test_a_requeued_job_read_again_after_it_finished_stays_one_job(cluster):
    """Slurm's accounting keeps each run of a requeued job (``sacct -D``): read once while
    the job was finishing and again later (the overlap of two collections), both runs
    belong to the same job, and the second read stores nothing."""
    account = "training.vision"
    runs = "\n".join(
        [
            sacct_row(
                "44",
                "REQUEUED",
                account,
                "2026-11-01T08:00:00",
                "2026-11-01T08:00:00",
                "2026-11-01T08:30:00",
            ),
            sacct_row(
                "44",
                "COMPLETED",
                account,
                "2026-11-01T08:30:01",
                "2026-11-01T08:30:05",
                "2026-11-01T09:00:00",
            ),
        ]
    )
    first = collect_cluster(
        cluster=cluster, commands=Replay("", runs), now=datetime(2026, 11, 1, 9, 1, tzinfo=UTC)
    )
    again = collect_cluster(
        cluster=cluster, commands=Replay("", runs), now=datetime(2026, 11, 1, 9, 2, tzinfo=UTC)
    )
    assert first.ingest.rejected == 0 and first.ingest.jobs_created == 1
    assert (again.ingest.stored, again.ingest.jobs_created) == (0, 0)
    job = WorkloadJob.objects.get(job_id="44")
    assert job.key == f"44@{epoch('2026-11-01T08:00:00')}"
    assert (job.state, job.requeues) == (JobState.COMPLETED, 1)


def test_a_start_in_the_second_of_the_last_reading_ends_the_wait(cluster):
    """The collector reads the queue at 10:00:00.6 and sees the job pending; Slurm starts it
    at 10:00:00.8 and prints the start as 10:00:00. The start still ends the wait."""
    account = "training.vision"
    pending = Replay(squeue_row("45", "PENDING", "Resources", account, "2026-11-01T09:59:00"), "")
    collect_cluster(
        cluster=cluster,
        commands=pending,
        now=slurm_time("2026-11-01T10:00:00") + timedelta(microseconds=600_000),
    )
    running = Replay(
        squeue_row("45", "RUNNING", "None", account, "2026-11-01T09:59:00", "2026-11-01T10:00:00"),
        "",
    )
    collect_cluster(cluster=cluster, commands=running, now=slurm_time("2026-11-01T10:00:30"))
    job = WorkloadJob.objects.get(job_id="45")
    assert job.state == JobState.RUNNING and job.started_at == slurm_time("2026-11-01T10:00:00")
