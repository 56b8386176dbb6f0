"""Ops end a grant early, with a reason; the effective rules change back at that instant."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from approvals import services
from approvals.models import NotificationEvent, RequestState
from governance.models import GrantState
from governance.selectors import effective_rules
from tests.approvals.conftest import DAY, HOUR, T0, quota_exception, vision_maximum
from tests.conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def active(world, policies, lead, ops):
    request = quota_exception(world, lead)
    return services.request_approve(request=request, user=ops, now=T0 + HOUR)


def test_ops_revoke_an_active_grant(active, ops, lead):
    with pytest.raises(ValidationError):
        services.request_revoke(request=active, user=ops, reason="", now=T0 + DAY)
    revoked = services.request_revoke(
        request=active, user=ops, reason="The pool is needed for an outage", now=T0 + DAY
    )
    assert revoked.state_at(T0 + DAY) == RequestState.REVOKED
    assert revoked.state_at(T0 + DAY - HOUR) == RequestState.ACTIVE
    assert revoked.grant.state == GrantState.REVOKED
    assert vision_maximum(effective_rules(at=T0 + DAY - HOUR)) == 48
    assert vision_maximum(effective_rules(at=T0 + DAY)) == 40
    assert revoked.notifications.filter(user=lead, event=NotificationEvent.REVOKED).exists()
    # The beat task finds nothing more to do.
    assert services.requests_sync(now=T0 + DAY) == {}


def test_only_ops_revoke(active, lead, approver):
    for person in (lead, approver):
        with pytest.raises(PermissionDenied):
            services.request_revoke(request=active, user=person, reason="Mine", now=T0 + DAY)
    page = login(lead).post(reverse("request_revoke", args=[active.pk]), {"revoke-reason": "x"})
    assert page.status_code == 403


def test_the_api_revokes(active, ops, api_client):
    api_client.force_authenticate(ops)
    url = reverse("api_request_revoke", args=[active.pk])
    assert set(api_client.post(url, {}).json()["fields"]) == {"reason"}
    response = api_client.post(url, {"reason": "Outage"})
    assert response.status_code == 200
    assert response.json()["grant"]["state"] == "revoked"
