"""The beat task: requests follow their grants at the right instants, the effective rules
change and change back, people hear a day before and at the end, and a second run is harmless."""

import pytest

from approvals import services, tasks
from approvals.models import EventAction, Notification, NotificationEvent, RequestState
from governance.models import GrantState, RulesRevision
from governance.selectors import effective_rules
from tests.approvals.conftest import DAY, HOUR, T0, quota_exception, vision_maximum

pytestmark = pytest.mark.django_db

SECOND = HOUR / 3600


def _snapshot(request, at):
    request.refresh_from_db()
    return (
        request.state_at(at),
        request.grant.state if request.grant else None,
        request.events.count(),
        Notification.objects.count(),
        RulesRevision.objects.count(),
    )


@pytest.fixture
def approved(world, policies, lead, ops):
    request = quota_exception(world, lead)  # T0 to T0 + 3 days
    return services.request_approve(request=request, user=ops, now=T0 - HOUR)


def test_the_grant_starts_and_ends_at_the_requested_instants(approved):
    services.requests_sync(now=T0 - SECOND)
    assert _snapshot(approved, T0 - SECOND)[:2] == (RequestState.APPROVED, GrantState.SCHEDULED)
    assert vision_maximum(effective_rules(at=T0 - SECOND)) == 40

    services.requests_sync(now=T0)
    assert _snapshot(approved, T0)[:2] == (RequestState.ACTIVE, GrantState.ACTIVE)
    assert vision_maximum(effective_rules(at=T0)) == 48

    services.requests_sync(now=T0 + 3 * DAY - SECOND)
    assert _snapshot(approved, T0 + 3 * DAY - SECOND)[:2] == (
        RequestState.ACTIVE,
        GrantState.ACTIVE,
    )

    services.requests_sync(now=T0 + 3 * DAY)
    assert _snapshot(approved, T0 + 3 * DAY)[:2] == (RequestState.EXPIRED, GrantState.EXPIRED)
    assert vision_maximum(effective_rules(at=T0 + 3 * DAY)) == 40
    assert [event.action for event in approved.events.all()][-2:] == [
        EventAction.ACTIVATED,
        EventAction.EXPIRED,
    ]


@pytest.mark.parametrize("instant", [T0, T0 + 2 * DAY + HOUR, T0 + 3 * DAY])
def test_running_the_task_twice_is_harmless(approved, instant):
    services.requests_sync(now=instant)
    before = _snapshot(approved, instant)
    assert services.requests_sync(now=instant) == {}
    assert _snapshot(approved, instant) == before


def test_people_hear_a_day_before_the_end_and_at_the_end_once_each(approved, lead, ops):
    services.requests_sync(now=T0)
    services.requests_sync(now=T0 + 2 * DAY - SECOND)
    assert not Notification.objects.filter(event=NotificationEvent.ENDING_SOON).exists()

    assert services.requests_sync(now=T0 + 2 * DAY) == {"reminded": 1}
    services.requests_sync(now=T0 + 2 * DAY + HOUR)
    soon = Notification.objects.filter(event=NotificationEvent.ENDING_SOON)
    assert sorted(n.user.username for n in soon) == ["lead", "ops"]

    services.requests_sync(now=T0 + 3 * DAY)
    services.requests_sync(now=T0 + 3 * DAY + HOUR)
    ended = Notification.objects.filter(event=NotificationEvent.EXPIRED)
    assert sorted(n.user.username for n in ended) == ["lead", "ops"]
    assert "ended on" in ended[0].text


def test_a_grant_that_started_and_ended_between_runs_shows_both(approved):
    services.requests_sync(now=T0 + 4 * DAY)
    assert _snapshot(approved, T0 + 4 * DAY)[0] == RequestState.EXPIRED
    actions = [event.action for event in approved.events.all()]
    assert actions[-2:] == [EventAction.ACTIVATED, EventAction.EXPIRED]


def test_the_beat_task_calls_the_service(approved, monkeypatch):
    seen = {}
    monkeypatch.setattr(services, "requests_sync", lambda *, now: seen.setdefault("now", now))
    tasks.requests_sync()
    assert seen["now"] is not None
