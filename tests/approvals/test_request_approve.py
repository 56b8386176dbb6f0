"""Approving: the right approvers, never the requester, nobody twice, enough distinct
approvers, and a grant that starts at once or at the requested start."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from approvals import services
from approvals.models import Approval, EventAction, NotificationEvent, RequestState
from governance import services as governance_services
from governance.models import Grant, GrantState
from governance.selectors import effective_rules
from tests.approvals.conftest import DAY, HOUR, T0, quota_exception, upgrade, vision_maximum
from tests.conftest import REASON, login

pytestmark = pytest.mark.django_db


def test_approval_before_the_start_schedules_the_grant(world, policies, lead, ops):
    request = quota_exception(world, lead)

    approved = services.request_approve(request=request, user=ops, comment="Fine", now=T0 - HOUR)

    assert approved.state == RequestState.APPROVED
    grant = approved.grant
    assert (grant.state, grant.starts_at, grant.ends_at) == (
        GrantState.SCHEDULED,
        T0,
        T0 + 3 * DAY,
    )
    assert grant.source == f"request:{request.pk}"
    assert grant.extra_gpus == 8
    assert vision_maximum(effective_rules(at=T0 - HOUR)) == 40
    assert vision_maximum(effective_rules(at=T0)) == 48
    assert [event.action for event in approved.events.all()] == [
        EventAction.CREATED,
        EventAction.SUBMITTED,
        EventAction.APPROVAL,
        EventAction.APPROVED,
    ]


def test_approval_at_or_after_the_start_activates_at_once(world, policies, lead, ops):
    request = quota_exception(world, lead)

    approved = services.request_approve(request=request, user=ops, now=T0 + 2 * HOUR)

    assert approved.state_at(T0 + 2 * HOUR) == RequestState.ACTIVE
    # The grant starts when it was approved, not in the past the request asked for.
    assert (approved.grant.state, approved.grant.starts_at) == (GrantState.ACTIVE, T0 + 2 * HOUR)
    assert vision_maximum(effective_rules(at=T0 + HOUR)) == 40
    assert vision_maximum(effective_rules(at=T0 + 2 * HOUR)) == 48
    assert approved.events.filter(action=EventAction.ACTIVATED).count() == 1


def test_a_request_whose_period_ended_cannot_be_approved(world, policies, lead, ops):
    request = quota_exception(world, lead)
    with pytest.raises(ValidationError, match="reject the request instead"):
        services.request_approve(request=request, user=ops, now=T0 + 4 * DAY)
    assert not Grant.objects.exists()
    assert not Approval.objects.exists()


def test_the_requester_never_approves_their_own_request(world, policies, ops):
    request = quota_exception(world, ops)  # ops files; ops decides quota exceptions
    with pytest.raises(PermissionDenied, match="someone else must decide"):
        services.request_approve(request=request, user=ops, now=T0 - HOUR)
    assert login(ops).post(reverse("request_approve", args=[request.pk])).status_code == 403
    request.refresh_from_db()
    assert request.state == RequestState.SUBMITTED
    assert not Approval.objects.exists()


def test_self_approval_is_a_403_in_the_api(world, policies, ops, api_client):
    request = quota_exception(world, ops)
    api_client.force_authenticate(ops)
    response = api_client.post(reverse("api_request_approve", args=[request.pk]), {})
    assert response.status_code == 403
    assert "someone else must decide" in response.json()["detail"]


def test_people_who_are_not_approvers_cannot_approve(world, policies, lead, member, approver):
    request = quota_exception(world, lead)
    for person in (member, approver):  # ops decide quota exceptions
        with pytest.raises(PermissionDenied):
            services.request_approve(request=request, user=person, now=T0 - HOUR)


def test_two_approvers_are_needed_for_the_highest_tier(world, policies, lead, approver, ops):
    request = upgrade(world, lead, project=world.vision, tier=world.production)
    assert (request.approvals_required, request.owner_approver) == (2, approver)

    once = services.request_approve(request=request, user=approver, now=T0 - HOUR)

    assert once.state == RequestState.SUBMITTED
    assert once.grant is None
    assert effective_rules(at=T0).projects["vision"].tier == world.key
    twice = services.request_approve(request=request, user=ops, now=T0 - HOUR)
    assert twice.state == RequestState.APPROVED
    assert effective_rules(at=T0).projects["vision"].tier == world.production


def test_nobody_approves_twice(world, policies, lead, approver, api_client):
    request = upgrade(world, lead, project=world.vision, tier=world.production)
    services.request_approve(request=request, user=approver, now=T0 - HOUR)

    with pytest.raises(ValidationError, match="already decided"):
        services.request_approve(request=request, user=approver, now=T0 - HOUR)
    api_client.force_authenticate(approver)
    response = api_client.post(reverse("api_request_approve", args=[request.pk]), {})
    assert response.status_code == 400
    assert "already decided" in response.json()["fields"]["non_field_errors"][0]
    page = login(approver).post(reverse("request_approve", args=[request.pk]), follow=True)
    assert "already decided" in page.content.decode()
    assert Approval.objects.filter(request=request).count() == 1


def test_the_business_owner_decides_upgrades_to_their_tier(
    world, policies, ops, second_ops, approver
):
    request = upgrade(world, ops)  # speech → Key project, whose owner is ``approver``
    assert request.owner_approver == approver
    with pytest.raises(ValidationError, match="waits for the tier's business owner"):
        services.request_approve(request=request, user=second_ops, now=T0 - HOUR)
    approved = services.request_approve(request=request, user=approver, now=T0 - HOUR)
    assert approved.state == RequestState.APPROVED


def test_when_the_owner_files_ops_decide(world, policies, approver, second_ops):
    governance_services.membership_set(
        project=world.speech, member=approver, role="lead", user=world.ops, reason=REASON
    )
    request = upgrade(world, approver)
    assert request.owner_approver is None
    approved = services.request_approve(request=request, user=second_ops, now=T0 - HOUR)
    assert approved.state == RequestState.APPROVED


def test_ops_alone_cannot_approve_what_the_owner_must(world, policies, lead, ops, second_ops):
    request = upgrade(world, lead, project=world.vision, tier=world.production)
    services.request_approve(request=request, user=ops, now=T0 - HOUR)
    with pytest.raises(ValidationError, match="waits for the tier's business owner"):
        services.request_approve(request=request, user=second_ops, now=T0 - HOUR)


def test_people_are_told_by_notification_and_mail(
    world, policies, lead, ops, second_ops, mailoutbox, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        request = quota_exception(world, lead)
    asked = request.notifications.filter(event=NotificationEvent.SUBMITTED)
    assert {n.user.username for n in asked} == {"ops", "ops-two"}
    assert sorted(mail.to[0] for mail in mailoutbox) == ["ops-two@example.com", "ops@example.com"]
    assert "waiting for your decision" in mailoutbox[0].subject

    with django_capture_on_commit_callbacks(execute=True):
        services.request_approve(request=request, user=ops, now=T0 - HOUR)
    told = request.notifications.get(event=NotificationEvent.APPROVED, user=lead)
    assert "is approved; it starts on" in told.text
    assert told.link == reverse("request_detail", args=[request.pk])
    assert mailoutbox[-1].to in (["lead@example.com"], ["ops@example.com"])
