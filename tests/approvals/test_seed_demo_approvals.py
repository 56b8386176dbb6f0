"""The demo: pending requests in the approver's inbox, an active grant that ends within a day,
a request rejected with a reason; loading twice adds nothing."""

import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from approvals import selectors
from approvals.models import ApprovalPolicy, RequestState, UpgradeRequest
from governance.models import Grant, GrantState, User

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo():
    call_command("seed_demo")
    call_command("seed_demo_approvals")


def test_the_approvers_inbox_holds_pending_requests(demo):
    approver = User.objects.get(username="approver")
    inbox = selectors.inbox(user=approver)
    assert len(inbox) >= 2
    assert all(request.state == RequestState.SUBMITTED for request in inbox)
    assert selectors.inbox(user=User.objects.get(username="ops"))


def test_one_project_has_an_active_grant_that_ends_soon(demo):
    now = timezone.now()
    ending = Grant.objects.filter(
        state=GrantState.ACTIVE, ends_at__gt=now, ends_at__lte=now + timedelta(days=1)
    )
    assert ending.count() == 1
    assert ending.get().request.state == RequestState.ACTIVE


def test_one_request_was_rejected_with_a_reason(demo):
    rejected = UpgradeRequest.objects.get(stage=RequestState.REJECTED)
    assert "not a production service" in rejected.approvals.get().comment


def test_loading_twice_adds_nothing(demo, capsys):
    counts = (ApprovalPolicy.objects.count(), UpgradeRequest.objects.count(), Grant.objects.count())
    call_command("seed_demo_approvals")
    assert "nothing to add" in capsys.readouterr().out
    assert counts == (
        ApprovalPolicy.objects.count(),
        UpgradeRequest.objects.count(),
        Grant.objects.count(),
    )


@pytest.mark.django_db(transaction=True)
def test_loading_prints_no_mail_about_past_events(settings, capsys):
    """Committed for real, as `make run` does: the mails' on-commit callbacks run."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    call_command("seed_demo")
    call_command("seed_demo_approvals")

    out = capsys.readouterr().out
    assert "Subject:" not in out
    assert "Demo approvals loaded" in out
    from approvals.models import Notification

    assert Notification.objects.count() > 5  # the in-app notifications are kept


def test_requests_and_grants_are_dated_when_they_happened(demo):
    now = timezone.now()
    requests = UpgradeRequest.objects.order_by("created_at")
    created = [request.created_at for request in requests]
    assert created[0] < now - timedelta(days=30)
    assert len({moment.date() for moment in created}) >= 4
    for grant in Grant.objects.select_related("request"):
        assert grant.created_at > grant.request.created_at
        assert grant.created_at < now


def test_no_notification_of_the_demo_has_a_double_period(demo):
    """Dates end sentences ("… ended on 30 Nov 2026, 17:05."): no "p.m.." any more."""
    from approvals.models import Notification

    texts = list(Notification.objects.values_list("text", flat=True))
    assert any(re.search(r"\d{1,2} \w{3} \d{4}, \d{2}:\d{2}\.$", text) for text in texts)
    assert [text for text in texts if ".." in text] == []


def test_the_demo_loads_its_job_history_before_its_requests():
    """As `make run` loads it (deploy/run-dev.sh): the requests' evidence then shows the
    projects' real usage, not "0.0 GPU-hours in the last 30 days"."""
    from io import StringIO
    from pathlib import Path

    from django.conf import settings

    script = (Path(settings.BASE_DIR) / "deploy" / "run-dev.sh").read_text()
    assert script.index("seed_demo_workload") < script.index("seed_demo_approvals")
    call_command("seed_demo")
    call_command("seed_demo_workload", "--days", "14", stdout=StringIO())
    call_command("seed_demo_approvals")
    used = [
        request.evidence["usage"]["usage"]["gpu_hours"]
        for request in UpgradeRequest.objects.exclude(evidence={})
        if (request.evidence.get("usage") or {}).get("usage")
    ]
    # Loaded the other way round, every one of them read 0.0 (one demo project runs nothing).
    assert sum(hours > 0 for hours in used) >= len(used) - 1 >= 4
