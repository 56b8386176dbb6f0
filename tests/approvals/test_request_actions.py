"""Who may do what to a request, and when: the page shows a button exactly when the service
accepts the action, for every person, action and state (one rule: ``request_action_blocker``)."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from approvals import selectors, services
from approvals.models import RequestAction, RequestState
from tests.approvals.conftest import DAY, HOUR, quota_exception
from tests.conftest import REASON, login

pytestmark = pytest.mark.django_db

PERSONAS = ["lead", "member", "approver", "ops", "outsider"]
# Who may ever do it (a quota exception of Vision filed by its lead, decided by ops) ...
MAY = {
    RequestAction.SUBMIT: {"lead", "ops"},
    RequestAction.WITHDRAW: {"lead", "ops"},
    RequestAction.REVOKE: {"ops"},
    RequestAction.APPROVE: {"ops"},
    RequestAction.REJECT: {"ops"},
}
# ... and in which states.
WHEN = {
    RequestAction.SUBMIT: {RequestState.DRAFT},
    RequestAction.WITHDRAW: {RequestState.DRAFT, RequestState.SUBMITTED},
    RequestAction.REVOKE: {RequestState.ACTIVE},
    RequestAction.APPROVE: {RequestState.SUBMITTED},
    RequestAction.REJECT: {RequestState.SUBMITTED},
}
CALLS = {
    RequestAction.SUBMIT: lambda request, user: services.request_submit(request=request, user=user),
    RequestAction.WITHDRAW: lambda request, user: services.request_withdraw(
        request=request, user=user
    ),
    RequestAction.REVOKE: lambda request, user: services.request_revoke(
        request=request, user=user, reason=REASON
    ),
    RequestAction.APPROVE: lambda request, user: services.request_approve(
        request=request, user=user
    ),
    RequestAction.REJECT: lambda request, user: services.request_reject(
        request=request, user=user, reason=REASON
    ),
}


def _request_in(state, world, lead, ops):
    now = timezone.now()
    if state == RequestState.ACTIVE:
        request = quota_exception(
            world, lead, starts_at=now - HOUR, ends_at=now + DAY, now=now - 2 * HOUR
        )
        return services.request_approve(request=request, user=ops, now=now - 2 * HOUR)
    return quota_exception(
        world,
        lead,
        starts_at=now + HOUR,
        ends_at=now + DAY,
        now=now,
        submit=state == RequestState.SUBMITTED,
    )


@pytest.mark.parametrize("action", list(MAY))
@pytest.mark.parametrize("state", [RequestState.DRAFT, RequestState.SUBMITTED, RequestState.ACTIVE])
def test_pages_and_services_ask_the_same_rule(request, world, policies, lead, ops, state, action):
    upgrade = _request_in(state, world, lead, ops)
    assert upgrade.state == state
    for persona in PERSONAS:
        user = request.getfixturevalue(persona)
        expected = (
            "refused"
            if persona not in MAY[action]
            else ("done" if state in WHEN[action] else "not now")
        )
        blocker = selectors.request_action_blocker(request=upgrade, user=user, action=action)
        page = login(user).get(reverse("request_detail", args=[upgrade.pk]))
        if page.status_code == 404:
            # Read scoping: whoever may not read the request sees no page and no button.
            assert expected == "refused", (persona, blocker)
        else:
            assert page.context[f"may_{action}"] is (expected == "done"), (persona, blocker)
        with transaction.atomic():
            try:
                CALLS[action](upgrade, user)
            except PermissionDenied:
                outcome = "refused"
            except ValidationError:
                outcome = "not now"
            else:
                outcome = "done"
            transaction.set_rollback(True)
        assert outcome == expected, (persona, blocker)
        upgrade.refresh_from_db()
