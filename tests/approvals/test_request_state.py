"""A request's state is read from its grant, not copied: it is right at every instant without
the beat task, the database filter agrees with it, and pages, API and inbox show it."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from approvals import services
from approvals.models import (
    EventAction,
    Notification,
    NotificationEvent,
    RequestStage,
    RequestState,
    UpgradeRequest,
)
from governance import services as governance_services
from tests.approvals.conftest import DAY, HOUR, T0, quota_exception
from tests.conftest import REASON, login, token_for

pytestmark = pytest.mark.django_db

# The request asks for T0 to T0 + 3 days and is approved at T0 - 1 h.
INSTANTS = {
    "before the start": (T0 - HOUR, RequestState.APPROVED),
    "at the start": (T0, RequestState.ACTIVE),
    "inside": (T0 + DAY, RequestState.ACTIVE),
    "at the end": (T0 + 3 * DAY, RequestState.EXPIRED),
    "after the end": (T0 + 4 * DAY, RequestState.EXPIRED),
}


@pytest.fixture
def approved(world, policies, lead, ops):
    request = quota_exception(world, lead)
    return services.request_approve(request=request, user=ops, now=T0 - HOUR)


@pytest.mark.parametrize("instant", INSTANTS)
def test_the_state_follows_the_grant_without_the_beat_task(approved, instant):
    at, expected = INSTANTS[instant]
    assert approved.stage == RequestStage.APPROVED
    assert approved.state_at(at) == expected
    # The database says the same, for every state.
    for state in RequestState:
        found = set(UpgradeRequest.objects.in_state(state, at=at).values_list("pk", flat=True))
        assert found == ({approved.pk} if state == expected else set()), state


@pytest.mark.parametrize("revoked", ["before the start", "inside"])
def test_a_revoked_grant_makes_the_request_revoked_from_that_instant(approved, ops, revoked):
    at = INSTANTS[revoked][0]
    services.request_revoke(request=approved, user=ops, reason=REASON, now=at)
    approved.refresh_from_db()
    assert approved.state_at(at - timedelta(seconds=1)) == INSTANTS[revoked][1]
    for later in (at, T0 + DAY, T0 + 4 * DAY):
        assert approved.state_at(later) == RequestState.REVOKED
        assert list(UpgradeRequest.objects.in_state(RequestState.REVOKED, at=later)) == [approved]


def test_a_grant_revoked_outside_the_request_is_announced_once(approved, ops, lead):
    assert approved.grant is not None
    services.requests_sync(now=T0)
    governance_services.grant_revoke(grant=approved.grant, user=ops, reason=REASON, now=T0 + DAY)
    assert services.requests_sync(now=T0 + DAY) == {RequestState.REVOKED: 1}
    assert services.requests_sync(now=T0 + DAY + HOUR) == {}
    approved.refresh_from_db()
    assert approved.state_at(T0 + DAY) == RequestState.REVOKED
    actions = [event.action for event in approved.events.all()]
    assert actions.count(EventAction.REVOKED) == 1
    revoked = Notification.objects.filter(event=NotificationEvent.REVOKED)
    assert sorted(n.user.username for n in revoked) == ["lead", "ops"]


def test_start_and_end_are_announced_once_each(approved):
    for at in (T0, T0 + HOUR, T0 + 3 * DAY, T0 + 3 * DAY + HOUR, T0 + 5 * DAY):
        services.requests_sync(now=at)
    actions = [event.action for event in approved.events.all()]
    assert actions.count(EventAction.ACTIVATED) == 1
    assert actions.count(EventAction.EXPIRED) == 1
    assert Notification.objects.filter(event=NotificationEvent.ACTIVATED).count() == 1
    assert Notification.objects.filter(event=NotificationEvent.EXPIRED).count() == 2


def _live(world, lead, ops, count):
    """``count`` requests in force now (real clock) and ``count`` still submitted."""
    now = timezone.now()
    for index in range(count):
        active = quota_exception(
            world,
            lead,
            extra_gpus=index + 1,
            starts_at=now - HOUR,
            ends_at=now + DAY,
            now=now - 2 * HOUR,
        )
        services.request_approve(request=active, user=ops, now=now - 2 * HOUR)
        quota_exception(
            world, lead, extra_gpus=index + 1, starts_at=now + HOUR, ends_at=now + DAY, now=now
        )


def _ids(html: str) -> set[str]:
    return set(re.findall(r'href="/requests/(\d+)/"', html))


def test_pages_and_api_filter_by_the_state_now(world, policies, lead, ops, api_client):
    _live(world, lead, ops, 2)
    active = {
        str(pk)
        for pk in UpgradeRequest.objects.filter(stage=RequestStage.APPROVED).values_list(
            "pk", flat=True
        )
    }
    page = login(ops).get(reverse("request_list"), {"state": RequestState.ACTIVE})
    assert _ids(page.content.decode()) == active
    assert "Active" in page.content.decode()
    api_client.force_authenticate(ops)
    rows = api_client.get(reverse("api_request_list"), {"state": RequestState.ACTIVE}).json()
    assert {str(row["id"]) for row in rows["results"]} == active
    assert {row["state"] for row in rows["results"]} == {RequestState.ACTIVE}
    pending = api_client.get(reverse("api_request_list"), {"state": RequestState.SUBMITTED})
    assert pending.json()["count"] == 2
    inbox = api_client.get(reverse("api_inbox")).json()
    assert {row["state"] for row in inbox["results"]} == {RequestState.SUBMITTED}


@pytest.mark.parametrize(
    ("route", "api", "queries"),
    [
        # session, user, whether the user may file (the "New request" button), requests,
        # their approvals, approvers (a first page holding the whole list is not counted)
        ("request_list", False, 6),
        # token with its user, count, the page, approvals, approvers
        ("api_request_list", True, 5),
    ],
)
def test_filtering_by_state_costs_a_fixed_number_of_queries(
    world, policies, lead, ops, api_client, django_assert_num_queries, route, api, queries
):
    if api:
        api_client.credentials(HTTP_AUTHORIZATION=token_for(ops))
        api_client.get(reverse(route))  # the token's first use in a minute records it
        client = api_client
    else:
        client = login(ops)
    _live(world, lead, ops, 1)
    with django_assert_num_queries(queries):
        first = client.get(reverse(route), {"state": RequestState.ACTIVE})
    _live(world, lead, ops, 4)
    with django_assert_num_queries(queries):
        more = client.get(reverse(route), {"state": RequestState.ACTIVE})
    assert first.status_code == more.status_code == 200
