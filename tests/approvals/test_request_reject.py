"""Rejecting needs a reason, which the requester is told; a rejected request is final."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from approvals import services
from approvals.models import EventAction, NotificationEvent, RequestState
from tests.approvals.conftest import HOUR, T0, quota_exception, upgrade
from tests.conftest import login

pytestmark = pytest.mark.django_db


def test_a_rejection_needs_a_reason(world, policies, lead, ops):
    request = quota_exception(world, lead)
    with pytest.raises(ValidationError) as error:
        services.request_reject(request=request, user=ops, reason="  ", now=T0 - HOUR)
    assert "reason" in error.value.message_dict

    rejected = services.request_reject(
        request=request, user=ops, reason="Use the inference pool", now=T0 - HOUR
    )

    assert rejected.state == RequestState.REJECTED
    assert rejected.events.get(action=EventAction.REJECTED).comment == "Use the inference pool"
    told = rejected.notifications.get(user=lead, event=NotificationEvent.REJECTED)
    assert "Use the inference pool" in told.text
    with pytest.raises(ValidationError):
        services.request_approve(request=request, user=world.ops, now=T0 - HOUR)


def test_one_rejection_decides_a_two_approver_request(world, policies, lead, approver, ops):
    request = upgrade(world, lead, project=world.vision, tier=world.production)
    services.request_approve(request=request, user=approver, now=T0 - HOUR)
    rejected = services.request_reject(request=request, user=ops, reason="No", now=T0 - HOUR)
    assert rejected.state == RequestState.REJECTED
    assert rejected.grant is None


def test_the_requester_cannot_reject_their_own_request(world, policies, ops):
    request = quota_exception(world, ops)
    with pytest.raises(PermissionDenied):
        services.request_reject(request=request, user=ops, reason="Oops", now=T0 - HOUR)


def test_the_page_and_api_ask_for_the_reason(world, policies, lead, ops, api_client):
    request = quota_exception(world, lead)
    page = login(ops).post(reverse("request_reject", args=[request.pk]), {"reject-reason": ""})
    assert page.status_code == 400
    assert "This field is required" in page.content.decode()

    api_client.force_authenticate(ops)
    url = reverse("api_request_reject", args=[request.pk])
    assert set(api_client.post(url, {}).json()["fields"]) == {"reason"}
    response = api_client.post(url, {"reason": "Not this month"})
    assert response.status_code == 200
    assert response.json()["state"] == "rejected"
    assert response.json()["approvals"][0]["comment"] == "Not this month"


def test_a_rejection_is_not_counted_as_an_approval(world, policies, lead, ops):
    request = quota_exception(world, lead)
    services.request_reject(request=request, user=ops, reason="No", now=T0 - HOUR)
    text = login(lead).get(reverse("request_list")).content.decode()
    assert '<td class="num">0 / 1</td>' in text
