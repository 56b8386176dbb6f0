"""Withdrawing: the requester, a lead of the project or ops take back what is not decided."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from approvals import services
from approvals.models import NotificationEvent, RequestState
from tests.approvals.conftest import HOUR, T0, quota_exception
from tests.conftest import login

pytestmark = pytest.mark.django_db


def test_the_requester_withdraws_and_the_approvers_are_told(world, policies, member, lead, ops):
    request = quota_exception(world, member)
    withdrawn = services.request_withdraw(
        request=request, user=member, comment="Found GPUs", now=T0 - HOUR
    )
    assert withdrawn.state == RequestState.WITHDRAWN
    assert withdrawn.notifications.filter(user=ops, event=NotificationEvent.WITHDRAWN).exists()


def test_the_lead_may_withdraw_a_members_request_but_not_the_reverse(world, policies, member, lead):
    by_lead = quota_exception(world, lead)
    with pytest.raises(PermissionDenied):
        services.request_withdraw(request=by_lead, user=member, now=T0 - HOUR)
    by_member = quota_exception(world, member)
    assert services.request_withdraw(request=by_member, user=lead, now=T0 - HOUR).state == (
        RequestState.WITHDRAWN
    )


def test_a_decided_request_cannot_be_withdrawn(world, policies, lead, ops):
    request = quota_exception(world, lead)
    services.request_approve(request=request, user=ops, now=T0 - HOUR)
    with pytest.raises(ValidationError, match="is approved"):
        services.request_withdraw(request=request, user=lead, now=T0 - HOUR)
    response = login(lead).post(reverse("request_withdraw", args=[request.pk]), follow=True)
    assert "is approved" in response.content.decode()
