"""Evidence where people decide: an approver sees real usage and waits; a queue-jump request
shows whether its jobs are pending and why; home pages list the projects' jobs."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from approvals.selectors import project_evidence
from queues.models import EventKind, JobState
from queues.services.workload import JobEvent, events_ingest
from tests.conftest import login

NOW = timezone.now()


def ev(job, kind, hours_ago, **extra):
    return JobEvent(
        source="hpc",
        event_id=f"{job}:{kind}",
        job_id=job,
        time=NOW - timedelta(hours=hours_ago),
        kind=kind,
        **extra,
    )


@pytest.fixture
def history(world):
    vision = {"project": world.vision, "flavor": world.a100, "tier": world.key}
    events_ingest(
        events=[
            # 8 GPUs for 24 h, ended; 4 GPUs running for the last 12 h.
            ev("1", EventKind.SUBMITTED, 50, gpus=8, **vision),
            ev("1", EventKind.PENDING, 49.9, reason="Resources"),
            ev("1", EventKind.STARTED, 48),
            ev("1", EventKind.ENDED, 24, state=JobState.COMPLETED),
            ev("2", EventKind.SUBMITTED, 13, gpus=4, **vision),
            ev("2", EventKind.PENDING, 12.9, reason="AssocGrpGRES"),
            ev("2", EventKind.STARTED, 12),
            ev("3", EventKind.SUBMITTED, 2, gpus=2, **vision),
            ev("3", EventKind.PENDING, 1.9, reason="Priority"),
        ]
    )
    return world


def test_the_approver_sees_usage_and_waits_of_the_last_30_days(history):
    evidence = project_evidence(project=history.vision, at=NOW, job_ids=["3", "2", "77"])
    usage = evidence["usage"]
    assert usage["usage"]["gpu_hours"] == pytest.approx(8 * 24 + 4 * 12, abs=0.1)
    [a100] = usage["flavors"]
    assert (a100["running"], a100["guarantee"], a100["maximum"], a100["pending"]) == (4, 24, 40, 2)
    waits = {w["category"]: w for w in evidence["recent_waits"]}
    assert waits["resource"]["mean_minutes"] == 120 and waits["quota"]["mean_minutes"] == 60
    assert waits["queue_rule"]["jobs"] == 1
    jobs = {j["job_id"]: j for j in evidence["jobs"]}
    assert jobs["3"]["pending"] and jobs["3"]["category"] == "Queue rule"
    assert jobs["3"]["reason"] == "Priority"
    assert not jobs["2"]["pending"] and jobs["2"]["known"]
    assert not jobs["77"]["known"]


@override_settings(ARBITER_WORKLOAD_EVIDENCE="", ARBITER_JOBS_STATUS="")
def test_without_the_hooks_nothing_is_made_up(history):
    evidence = project_evidence(project=history.vision, at=NOW, job_ids=["3"])
    assert evidence["usage"] is None and evidence["recent_waits"] is None
    assert evidence["jobs"] is None


def test_the_lead_and_member_home_pages_show_running_and_waiting_jobs(history, lead, member):
    for user in (lead, member):
        page = login(user).get("/").content.decode()
        assert "/projects/vision/workload/" in page
        assert "1 running (4 GPUs), 1 waiting" in page
