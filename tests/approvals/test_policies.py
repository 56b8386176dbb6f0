"""Approval policies are governed rules: only ops change them, always with a reason, and
each change is kept in their history (tests/approvals/test_policy_changes.py: as rule
changes that a second person approves)."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from approvals import services
from approvals.models import RequestKind
from governance.models import RuleChange
from tests.approvals.conftest import DAY, HOUR, T0, quota_exception
from tests.conftest import login

pytestmark = pytest.mark.django_db


def test_ops_change_a_policy_with_a_reason_kept_in_its_history(world, policies, ops):
    policy = services.policy_update(
        policy=policies.quota_exception,
        user=ops,
        reason="Two weeks proved too long",
        data={"max_duration_days": 7},
    )
    assert policy.max_duration_days == 7
    latest = policy.history.latest()
    assert (latest.history_user, latest.history_change_reason) == (ops, "Two weeks proved too long")


@pytest.mark.parametrize("persona", ["approver", "lead", "member"])
def test_only_ops_change_policies(world, policies, request, persona):
    user = request.getfixturevalue(persona)
    with pytest.raises(PermissionDenied):
        services.policy_update(
            policy=policies.upgrade, user=user, reason="Mine", data={"max_duration_days": 90}
        )
    assert (
        login(user).get(reverse("approval_policy_edit", args=[policies.upgrade.pk])).status_code
        == 403
    )
    assert login(user).get(reverse("approval_policy_create")).status_code == 403


def test_a_reason_is_required_and_limits_are_checked(world, policies, ops):
    with pytest.raises(ValidationError) as error:
        services.policy_update(
            policy=policies.upgrade, user=ops, reason="", data={"max_duration_days": 3}
        )
    assert "reason" in error.value.message_dict
    with pytest.raises(ValidationError) as error:
        services.policy_update(
            policy=policies.upgrade, user=ops, reason="More", data={"approvals_required": 5}
        )
    assert "approvals_required" in error.value.message_dict
    with pytest.raises(ValidationError) as error:
        services.policy_create(
            user=ops,
            reason="Again",
            kind=RequestKind.QUOTA_EXCEPTION,
            max_duration_days=3,
            monthly_flag_threshold=1,
        )
    assert "already a policy" in error.value.message_dict["tier"][0]


def test_the_edit_page_proposes_and_a_second_operator_applies(world, policies, ops, ops2):
    url = reverse("approval_policy_edit", args=[policies.protection.pk])
    client = login(ops)
    assert client.get(url).status_code == 200
    response = client.post(
        url,
        {
            "max_duration_days": 3,
            "approver": "ops",
            "approvals_required": 2,
            "monthly_flag_threshold": 1,
            "reason": "Protection is rare; two people look at it",
        },
    )
    assert response.status_code == 302
    change = RuleChange.objects.get()
    assert response["Location"] == change.get_absolute_url()
    policies.protection.refresh_from_db()
    assert policies.protection.approvals_required == 1  # proposed, not applied
    login(ops2).post(reverse("change_approve", args=[change.pk]))
    login(ops2).post(reverse("change_apply", args=[change.pk]))
    policies.protection.refresh_from_db()
    assert (policies.protection.max_duration_days, policies.protection.approvals_required) == (3, 2)
    history = client.get(reverse("approval_policy_history", args=[policies.protection.pk]))
    assert "Protection is rare; two people look at it" in history.content.decode()


def test_requests_over_the_monthly_count_are_flagged(world, policies, lead, ops):
    if (T0 - HOUR).month != (T0 + 2 * HOUR).month:
        pytest.skip("T0 is at the turn of a month: the count starts again")
    for offset in (0, 1):  # two approved exceptions this month reach the threshold (2)
        request = quota_exception(
            world,
            lead,
            starts_at=T0 + offset * HOUR,
            ends_at=T0 + DAY,
            extra_gpus=1,
        )
        services.request_approve(request=request, user=ops, now=T0 - HOUR)
    flagged = quota_exception(world, lead, starts_at=T0 + 2 * HOUR, ends_at=T0 + DAY)
    assert flagged.flagged
    assert "already had 2 approved exceptions this month" in flagged.flag_reason
    assert len(flagged.evidence["recent_exceptions"]) == 0  # none had started at T0 - 1 h
