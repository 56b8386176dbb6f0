"""My waiting jobs: the signed-in person's own pending jobs on the Jobs page, each with its
answer in plain words (the scheduler's code only as a detail), waits in days, hours and
minutes, whole GPUs as integers; and an approved exception that has not reached the job's
scheduler is said so."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from governance import services
from governance.models import GrantKind, Terms
from governance.templatetags.arbiter import duration, gpus, limit
from queues.models import EventKind
from queues.services.workload import JobEvent, events_ingest
from tests.conftest import login

pytestmark = pytest.mark.django_db


def _pending(world, job, reason, *, user_name, gpus=8, waited=timedelta(minutes=589)):
    now = timezone.now()
    events_ingest(
        events=[
            JobEvent(
                source="hpc",
                event_id=f"{job}:submit",
                job_id=job,
                time=now - waited,
                kind=EventKind.SUBMITTED,
                project=world.vision,
                tier=world.key,
                flavor=world.a100,
                gpus=gpus,
                user_name=user_name,
            ),
            JobEvent(
                source="hpc",
                event_id=f"{job}:pending",
                job_id=job,
                time=now - waited + timedelta(seconds=1),
                kind=EventKind.PENDING,
                reason=reason,
            ),
        ]
    )


def test_my_waiting_jobs_lists_only_mine_with_their_answers(world, member, lead):
    _pending(world, "7001", "Dependency", user_name="member")
    _pending(world, "7002", "Dependency", user_name="lead")

    html = login(member).get("/jobs/wait/").content.decode()

    mine = html.split('id="my-jobs"')[1].split("</section>")[0]
    assert "7001" in mine and "7002" not in mine
    assert "jobs it depends on" in mine  # the answer in words
    assert "<code>Dependency</code>" in mine  # the scheduler's code, as a detail
    assert "9 hours 49 minutes" in mine
    assert ">8 A100 80G<" in mine  # whole GPUs, no "8.0"


def test_no_waiting_job_says_so_in_chinese(world, member):
    client = login(member)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"

    html = client.get("/jobs/wait/").content.decode()

    assert "我的等待中作业" in html
    assert "您没有等待中的作业" in html and "“member”" in html


def test_a_job_page_reads_waits_in_days_and_hides_empty_scheduler_fields(world, member):
    _pending(world, "7003", "AssocGrpGRES", user_name="member", waited=timedelta(days=2, hours=3))

    html = login(member).get("/jobs/wait/", {"job": "7003"}).content.decode()

    assert "2 days 3 hours" in html
    assert "Queue, QOS, account" not in html and "— · — · —" not in html
    assert "s reason code</dt>" in html
    assert "<code>AssocGrpGRES</code>" in html


def test_an_approved_exception_not_on_any_scheduler_is_said_so(world, member, ops):
    _pending(world, "7004", "AssocGrpGRES", user_name="member")
    now = timezone.now()
    services.grant_create(
        user=ops,
        reason="Deadline",
        project=world.vision,
        source="request:7",
        terms=Terms(
            kind=GrantKind.QUOTA_EXCEPTION,
            pool=world.training,
            flavor=world.a100,
            extra_gpus=8,
            starts_at=now - timedelta(hours=1),
            ends_at=now + timedelta(days=2),
        ),
    )

    html = login(member).get("/jobs/wait/", {"job": "7004"}).content.decode()

    assert "An approved exception of this project (Quota exception" in html
    assert "Arbiter syncs no scheduler that runs this job (hpc)" in html


def test_the_page_filters_read_as_people_write():
    assert duration(45) == "0 minutes"
    assert duration(589 * 60) == "9 hours 49 minutes"
    assert duration(3 * 86400 + 5 * 60) == "3 days"
    assert duration(86400 + 3600) == "1 day 1 hour"
    assert duration("not a number") == "—"
    assert gpus(9.0) == "9" and gpus(0.25) == "0.25" and gpus(None) == "—"
    assert limit(None) == "∞" and limit(0) == "0"
