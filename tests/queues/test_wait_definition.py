"""One definition of a job's wait (docs/definitions.md), read by every reader.

A job that waited, ran, was requeued, ran again and is requeued once more has three waits.
Its *wait* is the first one (submit → first start) on the job page and API, in the approver's
evidence and in the review's rows; its *current wait* (since the last requeue) is what the
long-wait alert measures, and the alert says so. None of them is the sum of the waits."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from approvals.selectors import project_evidence
from queues import services
from queues.models import Alert, AlertKind, EventKind, JobState, WorkloadJob, WorkloadWait
from queues.selectors import alert_text, job_wait_explanation
from queues.selectors.definitions import current_wait_seconds, job_wait
from queues.services.workload import JobEvent, events_ingest
from queues.services.workload.rollup import workload_hours_roll_up
from tests.conftest import login

NOW = timezone.now().replace(microsecond=0)


def ev(job, kind, minutes_ago, n=0, **extra):
    return JobEvent(
        source="hpc",
        event_id=f"{job}:{kind}:{n}",
        job_id=job,
        time=NOW - timedelta(minutes=minutes_ago),
        kind=kind,
        **extra,
    )


@pytest.fixture
def requeued(world):
    keys = {"project": world.vision, "flavor": world.a100, "tier": world.production, "gpus": 4}
    events_ingest(
        events=[
            ev("7", EventKind.SUBMITTED, 300, **keys),
            ev("7", EventKind.PENDING, 299, reason="Resources"),
            ev("7", EventKind.STARTED, 240),  # first wait: 60 min
            ev("7", EventKind.REQUEUED, 120),
            ev("7", EventKind.STARTED, 100, n=1),  # second wait: 20 min
            ev("7", EventKind.REQUEUED, 30, n=1),
            ev("7", EventKind.PENDING, 29, n=1, reason="Resources"),  # current wait: 30 min
            # A job cancelled while pending: its wait ends at the cancel, and it never started.
            ev("8", EventKind.SUBMITTED, 90, **keys),
            ev("8", EventKind.PENDING, 89, reason="Resources"),
            ev("8", EventKind.ENDED, 50, state=JobState.CANCELLED),
        ]
    )
    return WorkloadJob.objects.get(job_id="7"), WorkloadJob.objects.get(job_id="8")


def test_the_wait_is_the_first_wait_and_the_current_wait_is_named_apart(requeued):
    job, cancelled = requeued
    wait = job_wait(job, now=NOW)
    assert wait.seconds == 60 * 60 and wait.started and not wait.ongoing
    assert current_wait_seconds(job, now=NOW) == 30 * 60
    gone = job_wait(cancelled, now=NOW)
    assert gone.seconds == 40 * 60 and gone.never_started and not gone.started
    assert current_wait_seconds(cancelled, now=NOW) is None
    # Asked before the first start, the wait is still going on (censored at that moment).
    early = job_wait(job, now=NOW - timedelta(minutes=250))
    assert early.ongoing and early.seconds == 50 * 60


def test_page_api_evidence_and_review_read_the_same_wait(requeued, world, ops):
    job, cancelled = requeued
    explanation = job_wait_explanation(job, now=NOW)
    assert explanation.waited_seconds == 3600 and explanation.current_wait_seconds == 1800
    body = login(ops).get(reverse("api_job_wait", args=["7"])).json()
    assert body["waited_seconds"] == 3600 and not body["never_started"]
    # The API reads the clock now: NOW (set when the module was imported) plus the time since.
    since = (timezone.now() - NOW).total_seconds()
    assert 1800 <= body["current_wait_seconds"] <= 1800 + since + 1
    evidence = project_evidence(project=world.vision, at=NOW)
    [resource] = evidence["recent_waits"]
    assert resource["jobs"] == 2 and resource["mean_minutes"] == (60 + 40) // 2
    assert resource["never_started"] == 1 and resource["still_waiting"] == 0
    workload_hours_roll_up(until=NOW)
    stored = {w.job_id: w for w in WorkloadWait.objects.all()}
    assert (stored[job.pk].wait_end - stored[job.pk].submitted_at).total_seconds() == 3600
    assert stored[cancelled.pk].wait_end == cancelled.ended_at


def test_the_long_wait_alert_measures_and_names_the_current_wait(requeued, world):
    assert requeued[0].requeues == 2
    assert world.production.wait_alert_minutes == 10
    services.wait_alerts_check(now=NOW)
    alert = Alert.objects.get(kind=AlertKind.LONG_WAIT)
    assert alert.details["minutes"] == 30  # since the last requeue, not 60 nor 110
    _subject, body = alert_text(alert)
    assert "current wait" in body and "30 minutes" in body
