"""Approval policies are a governed rule kind: a change of one (page, API, rollback) is
proposed, approved by a second person, applied with history naming the change and rolled
back by a new change. A policy that would let one person decide a kind of request alone is
refused when proposed, naming the rule (four eyes on requests)."""

import html

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from approvals import services
from approvals.models import ApprovalPolicy, RequestKind, RequestStage
from governance import services as governance_services
from governance.models import ChangeStatus, RuleChange
from tests.approvals.conftest import DAY, T0, upgrade
from tests.conftest import login

pytestmark = pytest.mark.django_db

RULE = "Four eyes on requests"
FOUR_EYES = "You proposed this change: someone else must approve it."


def _text(response) -> str:
    return html.unescape(response.content.decode())


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _form(policy: ApprovalPolicy, **changes) -> dict:
    return {
        "max_duration_days": policy.max_duration_days,
        "approver": policy.approver,
        "approvals_required": policy.approvals_required,
        "monthly_flag_threshold": policy.monthly_flag_threshold,
        "reason": "Simpler",
        **changes,
    }


def test_the_issues_policy_edit_is_refused_at_proposal(world, policies, ops):
    """The issue's chain: production upgrades go from "tier owner + 1 ops, at most 7 days"
    to "ops, 1 approval, 365 days": refused, naming the rule; nothing is recorded."""
    production = policies.production_upgrade
    url = reverse("approval_policy_edit", args=[production.pk])
    response = login(ops).post(
        url,
        _form(production, approver="ops", approvals_required=1, max_duration_days=365),
    )
    assert response.status_code == 200
    assert RULE in _text(response) and "would need 1" in _text(response)
    assert not RuleChange.objects.exists()
    production.refresh_from_db()
    assert (production.approver, production.approvals_required) == ("tier_owner", 2)


def test_a_policy_edit_is_never_approved_by_its_proposer(world, policies, ops, ops2, member):
    """The same edit with four eyes kept (365 days, ops, 2 approvals) is proposed; ops alone
    cannot approve it (page or API), so a 300-day upgrade still cannot be submitted."""
    production = policies.production_upgrade
    response = login(ops).post(
        reverse("approval_policy_edit", args=[production.pk]),
        _form(production, approver="ops", max_duration_days=365, reason="Long programmes"),
    )
    assert response.status_code == 302, _text(response)
    change = RuleChange.objects.get()
    refused = login(ops).post(reverse("change_approve", args=[change.pk]))
    assert refused.status_code == 403 and FOUR_EYES in _text(refused)
    refused = _api(ops).post(reverse("api_change_approve", args=[change.pk]), {}, format="json")
    assert refused.status_code == 403 and FOUR_EYES in refused.json()["detail"]
    production.refresh_from_db()
    assert production.max_duration_days == 7
    with pytest.raises(Exception, match="At most 7 days"):
        upgrade(world, member, project=world.vision, tier=world.production, ends_at=T0 + 300 * DAY)

    # A second person approves: applied, with history naming the change; then rolled back.
    governance_services.rule_change_approve(change=change, user=ops2)
    governance_services.rule_change_apply(change=change, user=ops2)
    production.refresh_from_db()
    assert (production.max_duration_days, production.approver) == (365, "ops")
    latest = production.history.latest()
    assert (latest.history_user, latest.history_change_reason, latest.rule_change_id) == (
        ops2,
        "Long programmes",
        change.pk,
    )
    rollback = governance_services.rule_change_rollback(
        change=change, user=ops2, reason="Too long after all"
    )
    governance_services.rule_change_apply(
        change=governance_services.rule_change_approve(change=rollback, user=ops), user=ops
    )
    production.refresh_from_db()
    assert (production.max_duration_days, production.approver) == (7, "tier_owner")
    change.refresh_from_db()
    assert change.status == ChangeStatus.ROLLED_BACK


def test_a_rollback_that_would_leave_one_approver_is_refused(world, policies, ops, ops2):
    """Raising the quota exceptions' approvals to 2 applies; rolling it back would restore
    one approver, so it is refused when proposed, naming the rule."""
    policy = policies.quota_exception
    raised = governance_services.rule_object_propose_update(
        obj=policy, user=ops, reason="Two people", data={"approvals_required": 2}
    )
    governance_services.rule_change_apply(
        change=governance_services.rule_change_approve(change=raised, user=ops2), user=ops2
    )
    with pytest.raises(Exception, match=RULE):
        governance_services.rule_change_rollback(change=raised, user=ops2, reason="Back")
    policy.refresh_from_db()
    assert policy.approvals_required == 2


def test_the_new_policy_page_proposes(world, policies, ops, ops2):
    ApprovalPolicy.objects.filter(pk=policies.queue_jump.pk).delete()  # make room (no requests)
    url = reverse("approval_policy_create")
    data = {
        "kind": RequestKind.QUEUE_JUMP,
        "tier": "",
        "max_duration_days": 2,
        "approver": "tier_owner",
        "approvals_required": 1,
        "monthly_flag_threshold": 3,
        "reason": "Queue jumps again",
    }
    refused = login(ops).post(url, data)
    assert refused.status_code == 200 and RULE in _text(refused)
    assert not RuleChange.objects.exists()
    response = login(ops).post(url, {**data, "approvals_required": 2})
    assert response.status_code == 302, _text(response)
    change = RuleChange.objects.get()
    assert not ApprovalPolicy.objects.filter(kind=RequestKind.QUEUE_JUMP).exists()
    assert login(ops).post(reverse("change_approve", args=[change.pk])).status_code == 403
    governance_services.rule_change_apply(
        change=governance_services.rule_change_approve(change=change, user=ops2), user=ops2
    )
    created = ApprovalPolicy.objects.get(kind=RequestKind.QUEUE_JUMP)
    assert created.approvals_required == 2
    assert created.history.get().rule_change_id == change.pk


def test_the_change_api_edits_a_policy_under_the_same_rule(world, policies, ops):
    response = _api(ops).post(
        reverse("api_change_propose"),
        {
            "reason": "One is enough",
            "edits": [
                {
                    "object_type": "approval_policy",
                    "object": str(policies.production_upgrade.pk),
                    "field": "approvals_required",
                    "value": 1,
                }
            ],
        },
        format="json",
    )
    assert response.status_code == 400, response.json()
    assert RULE in str(response.json())
    assert not RuleChange.objects.exists()


def test_submitted_requests_keep_the_terms_they_were_submitted_under(world, policies, ops, ops2):
    request = upgrade(world, ops)
    assert request.stage == RequestStage.SUBMITTED and request.approvals_required == 1
    change = governance_services.rule_object_propose_update(
        obj=policies.upgrade, user=ops, reason="Two people", data={"approvals_required": 2}
    )
    governance_services.rule_change_apply(
        change=governance_services.rule_change_approve(change=change, user=ops2), user=ops2
    )
    request.refresh_from_db()
    assert request.approvals_required == 1  # fixed when it was submitted
    assert services.policy_rule_kind().object_type == "approval_policy"
