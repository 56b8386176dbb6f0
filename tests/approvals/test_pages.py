"""The request pages: who may open them, what the inbox and a project's grants show, and the
query count of the list pages, which must not grow with their rows."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from approvals import services
from approvals.models import RequestKind
from tests.approvals.conftest import DAY, HOUR, T0, quota_exception, upgrade
from tests.conftest import login

pytestmark = pytest.mark.django_db

SIGNED_IN = ["member", "lead", "approver", "ops", "outsider"]


def _many(world, lead, ops, count: int) -> None:
    """Of each, ``count``: pending requests, half-approved production upgrades (waiting for
    ops), and approved requests."""
    for index in range(count):
        quota_exception(world, lead, extra_gpus=index + 1)
        half = upgrade(world, lead, project=world.vision, tier=world.production)
        assert half.owner_approver is not None
        services.request_approve(request=half, user=half.owner_approver, now=T0 - HOUR)
        approved = quota_exception(world, lead, extra_gpus=index + 1, ends_at=T0 + DAY)
        services.request_approve(request=approved, user=ops, now=T0 - HOUR)


@pytest.fixture
def pending(world, policies, lead):
    return quota_exception(world, lead)


@pytest.mark.parametrize("persona", SIGNED_IN)
def test_every_signed_in_person_reads_requests(request, pending, persona):
    """The pages open for everyone signed in; a request itself only for its project's
    members, its approvers and ops (the full matrix: test_read_scoping.py)."""
    client = login(request.getfixturevalue(persona))
    may_read = persona in {"ops", "lead", "member"}
    detail = client.get(reverse("request_detail", args=[pending.pk]))
    assert detail.status_code == (200 if may_read else 404)
    for url in [
        reverse("request_list"),
        reverse("inbox"),
        reverse("notification_list"),
        reverse("project_grants", args=["vision"]),
        reverse("approval_policy_list"),
        reverse("approval_policy_history", args=[pending.policy.pk]),
    ]:
        assert client.get(url).status_code == 200, url


def test_anonymous_visitors_are_sent_to_sign_in(client, pending):
    response = client.get(reverse("request_detail", args=[pending.pk]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name", ["request_detail", "approval_policy_history"])
def test_unknown_objects_are_404(ops, world, name):
    assert login(ops).get(reverse(name, args=[999999])).status_code == 404
    assert login(ops).get(reverse("project_grants", args=["nope"])).status_code == 404


def test_the_inbox_holds_what_waits_for_me_with_its_evidence(world, policies, lead, ops):
    mine = quota_exception(world, lead)  # ops decide
    upgrade(world, lead, project=world.vision, tier=world.production)  # the owner first
    text = login(ops).get(reverse("inbox")).content.decode()
    assert f"#{mine.pk} Quota exception" in text
    assert "Quotas in force" in text and "GPU-hours in the last 30 days" in text
    assert "Priority upgrade" in text  # ops hold the second seat of a production upgrade
    assert "Nothing waits for your decision." in login(lead).get(reverse("inbox")).content.decode()


def test_the_detail_page_shows_the_buttons_each_person_may_use(world, policies, lead, ops):
    request = quota_exception(world, lead)
    url = reverse("request_detail", args=[request.pk])
    as_ops = login(ops).get(url).content.decode()
    assert reverse("request_approve", args=[request.pk]) in as_ops
    assert reverse("request_reject", args=[request.pk]) in as_ops
    as_lead = login(lead).get(url).content.decode()
    assert reverse("request_approve", args=[request.pk]) not in as_lead
    assert reverse("request_withdraw", args=[request.pk]) in as_lead
    assert "someone else must decide" in as_lead


def test_approving_and_rejecting_from_the_page(world, policies, lead, ops, approver):
    request = upgrade(world, lead, project=world.vision, tier=world.production)
    response = login(approver).post(
        reverse("request_approve", args=[request.pk]), {"approve-comment": "Board demo"}
    )
    assert response.status_code == 302
    response = login(ops).post(
        reverse("request_reject", args=[request.pk]), {"reject-reason": "Not production work"}
    )
    assert response.status_code == 302
    text = login(lead).get(reverse("request_detail", args=[request.pk])).content.decode()
    assert "Board demo" in text and "Not production work" in text


def test_a_projects_grants_page_lists_grants_and_their_end(world, policies, lead, ops):
    now = timezone.now()
    request = quota_exception(
        world, lead, starts_at=now - HOUR, ends_at=now + 20 * HOUR, now=now - 2 * HOUR
    )
    services.request_approve(request=request, user=ops, now=now - HOUR)
    text = login(lead).get(reverse("project_grants", args=["vision"])).content.decode()
    assert "+8 GPUs of A100 80G in Training" in text
    assert "ends within a day" in text
    assert f"#{request.pk}" in text


def test_notifications_are_listed_and_marked_read(world, policies, lead, ops):
    request = quota_exception(world, lead)
    client = login(ops)
    text = client.get(reverse("notification_list")).content.decode()
    assert "waiting for your decision" in text
    assert client.post(reverse("notification_list")).status_code == 302
    assert not request.notifications.filter(user=ops, read_at__isnull=True).exists()


# --- query counts -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "queries"),
    [
        # session, user, whether the user may file (the "New request" button), requests
        # (no count: the first page holds them all here), their approvals, approvers (the
        # project and requester filters search as you type: no menu of every project)
        ("request_list", 6),
        # session, user, pending requests (not counted: one page), their approvals, approvers,
        # the proposed rule changes (none here; each one listed costs approval_problem's
        # reads, at most INBOX_CHANGES of them)
        ("inbox", 6),
    ],
)
def test_list_pages_cost_a_fixed_number_of_queries(
    world, policies, lead, ops, django_assert_num_queries, name, queries
):
    _many(world, lead, ops, 1)
    client = login(ops)
    with django_assert_num_queries(queries):
        first = client.get(reverse(name))
    _many(world, lead, ops, 6)
    with django_assert_num_queries(queries):
        response = client.get(reverse(name))
    assert response.status_code == first.status_code == 200
    rows = len(re.findall(r'href="/requests/\d+/"', response.content.decode()))
    assert rows > len(re.findall(r'href="/requests/\d+/"', first.content.decode()))


def test_kind_filter_on_the_list(world, policies, lead):
    quota_exception(world, lead)
    client = login(lead)
    assert (
        "Quota exception"
        in client.get(
            reverse("request_list"), {"kind": RequestKind.QUOTA_EXCEPTION, "mine": "on"}
        ).content.decode()
    )
    assert (
        "No requests."
        in client.get(reverse("request_list"), {"kind": RequestKind.QUEUE_JUMP}).content.decode()
    )
    # A bad value is a form error on the page (400), not a 500 and not a silent guess.
    bogus = client.get(reverse("request_list"), {"state": "bogus"})
    assert bogus.status_code == 400
    assert list(bogus.context["filter_form"].errors) == ["state"]


def test_ops_read_requests_and_policies_in_the_admin(pending, ops):
    client = login(ops)
    for name in [
        "admin:approvals_upgraderequest_changelist",
        "admin:approvals_approvalpolicy_changelist",
    ]:
        assert client.get(reverse(name)).status_code == 200
    detail = client.get(reverse("admin:approvals_upgraderequest_change", args=[pending.pk]))
    assert detail.status_code == 200
    assert b'name="_save"' not in detail.content
