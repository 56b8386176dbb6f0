"""An event after a job's end cannot reopen it: a pending report after the end is rejected and
listed like the other contradicting events, and the job stays ended (it used to wait on for
months in the demo)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from queues.models import EventKind, JobState, WorkloadEvent, WorkloadJob
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


# Nothing at or after a job's end reopens or relabels it, whatever the event's kind: each is
# refused (listed with its reason), the job and its wait unchanged.
AFTER_THE_END = [
    (EventKind.REQUEUED, 30, {}, "requeued after it had ended"),
    (EventKind.PENDING, 60, {"reason": "Resources"}, "waiting after it had ended"),
    (EventKind.SUBMITTED, 30, {}, "waiting after it had ended"),
    (EventKind.STARTED, 60, {}, "started after it had ended"),
    (EventKind.RESUMED, 30, {}, "started after it had ended"),
    (EventKind.SUSPENDED, 30, {}, "suspended after it had ended"),
    (EventKind.PREEMPTED, 60, {"reason": "Preempted"}, "preempted after it had ended"),
    (EventKind.ENDED, 30, {"state": JobState.FAILED}, "cannot relabel"),
    (EventKind.ENDED, 60, {"state": JobState.FAILED}, "cannot relabel"),
]


def ended_job(world, state=JobState.COMPLETED, started=True):
    keys = {"project": world.vision, "flavor": world.a100, "tier": world.key, "gpus": 1}
    events = [ev(EventKind.SUBMITTED, 100, **keys)]
    if started:
        events.append(ev(EventKind.STARTED, 90))
    events.append(ev(EventKind.ENDED, 60, state=state))
    assert events_ingest(events=events).rejected == 0


@pytest.mark.parametrize("kind, minutes_ago, extra, says", AFTER_THE_END)
def test_no_event_at_or_after_the_end_changes_the_job(world, kind, minutes_ago, extra, says):
    ended_job(world)
    before = WorkloadJob.objects.values().get(job_id="7")
    bad = JobEvent(
        source="hpc",
        event_id=f"7:late:{kind}",
        job_id="7",
        time=NOW - timedelta(minutes=minutes_ago),
        kind=kind,
        **extra,
    )
    result = events_ingest(events=[bad])
    assert (result.rejected, result.stored) == (1, 0)
    assert says in result.errors[0]["error"] and result.errors[0]["event_id"] == bad.event_id
    assert WorkloadJob.objects.values().get(job_id="7") == before
    assert not WorkloadEvent.objects.filter(event_id=bad.event_id).exists()


@pytest.mark.parametrize("kind", [EventKind.SUSPENDED, EventKind.PREEMPTED])
def test_a_cancelled_job_is_not_turned_suspended_or_preempted(world, kind):
    ended_job(world, state=JobState.CANCELLED, started=False)
    result = events_ingest(events=[ev(kind, 10)])
    assert result.rejected == 1 and "cancelled" in result.errors[0]["error"].lower()
    job = WorkloadJob.objects.get(job_id="7")
    assert job.state == JobState.CANCELLED and job.preemptions == 0


def test_a_repeat_of_the_end_and_the_jobs_own_late_submit_pass_and_change_nothing(world):
    ended_job(world)
    before = WorkloadJob.objects.values().get(job_id="7")
    repeat = JobEvent(
        source="hpc",
        event_id="7:end-again",
        job_id="7",
        time=NOW - timedelta(minutes=60),
        kind=EventKind.ENDED,
        state=JobState.COMPLETED,
    )
    submit = JobEvent(
        source="hpc",
        event_id="7:submit-again",
        job_id="7",
        time=NOW - timedelta(minutes=100),
        kind=EventKind.SUBMITTED,
    )
    result = events_ingest(events=[repeat, submit])
    assert (result.rejected, result.stored) == (0, 2)
    after = WorkloadJob.objects.values().get(job_id="7")
    assert {k: v for k, v in after.items() if k != "last_event_at"} == {
        k: v for k, v in before.items() if k != "last_event_at"
    }


def test_the_api_refuses_a_requeue_after_the_end_and_the_wait_stays(world, ops):
    client = APIClient()
    client.force_authenticate(ops)
    ended_job(world)
    late = {
        "event_id": "late-requeue",
        "source": "hpc",
        "scheduler": "slurm",
        "job_id": "7",
        "time": (NOW + timedelta(days=33)).isoformat(),
        "kind": "requeued",
    }
    at_the_end = {**late, "event_id": "pending-at-end", "kind": "pending", "reason": "Priority"}
    at_the_end["time"] = (NOW - timedelta(minutes=60)).isoformat()
    body = client.post(
        "/api/v1/workload-events/", {"events": [late, at_the_end]}, format="json"
    ).json()
    assert (body["stored"], body["rejected"]) == (0, 2), body
    assert {error["event_id"] for error in body["errors"]} == {"late-requeue", "pending-at-end"}
    job = WorkloadJob.objects.get(job_id="7")
    wait = client.get(f"/api/v1/jobs/{job.job_id}/wait/").json()
    assert wait["waited_seconds"] == 600 and wait["state"] == JobState.COMPLETED, wait
