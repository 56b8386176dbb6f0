"""An event after a job's end cannot reopen it: a pending report after the end is rejected and
listed like the other contradicting events, and the job stays ended (it used to wait on for
months in the demo)."""

from datetime import timedelta

from django.utils import timezone

from queues.models import EventKind, JobState, WorkloadJob
from queues.selectors.definitions import current_wait_seconds, job_wait
from queues.services.workload import JobEvent, events_ingest

NOW = timezone.now().replace(microsecond=0)


def ev(kind, minutes_ago, **extra):
    return JobEvent(
        source="hpc",
        event_id=f"7:{kind}:{minutes_ago}",
        job_id="7",
        time=NOW - timedelta(minutes=minutes_ago),
        kind=kind,
        **extra,
    )


def test_a_pending_event_after_the_end_is_rejected_and_listed(world):
    keys = {"project": world.vision, "flavor": world.a100, "tier": world.key, "gpus": 1}
    events_ingest(
        events=[
            ev(EventKind.SUBMITTED, 100, **keys),
            ev(EventKind.STARTED, 90),
            ev(EventKind.ENDED, 60, state=JobState.COMPLETED),
        ]
    )
    result = events_ingest(events=[ev(EventKind.PENDING, 30, reason="Resources")])
    assert result.rejected == 1
    assert "after it had ended" in result.errors[0]["error"]
    assert result.errors[0]["event_id"] == "7:pending:30"
    job = WorkloadJob.objects.get(job_id="7")
    assert job.state == JobState.COMPLETED and job.ended_at == NOW - timedelta(minutes=60)
    assert current_wait_seconds(job, now=NOW) is None
    assert job_wait(job, now=NOW).seconds == 600
