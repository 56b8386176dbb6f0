"""Four eyes across identities: a change authored through a service account counts as the
work of the people behind it (who made the account, who minted any of its tokens, its
project's leads), so none of them approves, applies or rolls it back."""

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from rest_framework.test import APIClient

from governance import selectors, services
from governance.models import ChangeStatus, RuleChange, ServiceAccount, SiteRole, TokenScope
from tests.conftest import REASON, _user

pytestmark = pytest.mark.django_db
RULE = "Four eyes"


def _api(user=None, key: str | None = None) -> APIClient:
    client = APIClient()
    if key is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    elif user is not None:
        client.force_authenticate(user)
    return client


def _site_wide_account_of(ops, ops2) -> tuple[ServiceAccount, str]:
    """ops makes a site-wide account and a token for it (ops2 approves what must be)."""
    made = _api(ops).post(
        reverse("api_service_account_create"),
        {"username": "ops-tool", "project": None, "reason": "Automation"},
        format="json",
    )
    assert made.status_code == 201, made.json()
    account = ServiceAccount.objects.get(pk=made.json()["id"])
    _approve_pending(account, ops2)
    token = _api(ops).post(
        reverse("api_service_account_token_create", args=[account.pk]),
        {"name": "tool", "scopes": ["read", "request"]},
        format="json",
    )
    assert token.status_code == 201, token.json()
    _approve_pending(account, ops2)
    return account, token.json()["key"]


def _approve_pending(account: ServiceAccount, approver) -> None:
    """What waits for a second person on ``account`` (itself, request-scoped tokens)."""
    account.refresh_from_db()
    if account.approved_at is None:
        services.service_account_approve(account=account, user=approver)
    for token in account.user.api_tokens.filter(approved_at=None, revoked_at=None):
        services.api_token_approve(token=token, user=approver)


def _propose(key: str, edit: dict) -> dict:
    response = _api(key=key).post(
        reverse("api_change_propose"), {"reason": "Rotation", "edits": [edit]}, format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()


def test_ops_cannot_promote_through_their_own_site_wide_account(world, ops, ops2, member):
    """Chain 1: a site-wide account ops made proposes ``site_role`` of a user; ops cannot
    approve it as themselves."""
    _, key = _site_wide_account_of(ops, ops2)
    change = _propose(
        key, {"object_type": "user", "object": "member", "field": "site_role", "value": "ops"}
    )
    refused = _api(ops).post(reverse("api_change_approve", args=[change["id"]]), {}, format="json")
    assert refused.status_code == 403
    assert RULE in refused.json()["detail"] and "ops-tool" in refused.json()["detail"]
    member.refresh_from_db()
    assert member.site_role == SiteRole.MEMBER
    assert RuleChange.objects.get(pk=change["id"]).status == ChangeStatus.PROPOSED
    # A second person approves; the maker still cannot apply it.
    assert _api(ops2).post(reverse("api_change_approve", args=[change["id"]])).status_code == 200
    refused = _api(ops).post(reverse("api_change_apply", args=[change["id"]]))
    assert refused.status_code == 403 and RULE in refused.json()["detail"]
    assert _api(ops2).post(reverse("api_change_apply", args=[change["id"]])).status_code == 200


def test_whoever_minted_a_token_cannot_apply_nor_roll_back_what_it_authored(world, ops, ops2):
    """Chain 2: ops2 made the account, ops minted the token used: neither decides."""
    third = _user("ops3", SiteRole.OPS)
    account = services.service_account_create(
        project=None, username="quota-bot", user=ops2, reason=REASON
    )
    services.service_account_approve(account=account, user=ops)
    token = services.service_account_token_create(
        account=account, name="bot", scopes=["read", "request"], user=ops, reason=REASON
    )
    with pytest.raises(PermissionDenied, match=RULE):
        services.api_token_approve(token=token, user=ops2)  # ops2 made the account
    services.api_token_approve(token=token, user=third)
    change = _propose(
        token.key,
        {
            "object_type": "quota",
            "object": str(world.vision_a100.pk),
            "field": "guarantee",
            "value": 30,
        },
    )
    for person in (ops, ops2):
        refused = _api(person).post(reverse("api_change_approve", args=[change["id"]]))
        assert refused.status_code == 403 and RULE in refused.json()["detail"]
    services.rule_change_approve(change=RuleChange.objects.get(pk=change["id"]), user=third)
    for person in (ops, ops2):
        with pytest.raises(PermissionDenied, match=RULE):
            services.rule_change_apply(change=RuleChange.objects.get(pk=change["id"]), user=person)
    services.rule_change_apply(change=RuleChange.objects.get(pk=change["id"]), user=third)
    for person in (ops, ops2):
        refused = _api(person).post(
            reverse("api_change_rollback", args=[change["id"]]), {"reason": "x"}, format="json"
        )
        assert refused.status_code == 403 and RULE in refused.json()["detail"]


def test_the_people_behind_an_account_are_recorded(world, ops, ops2, lead, ci_user):
    account = ci_user.service_account
    assert selectors.service_account_people(account) == {ops.pk, lead.pk}
    services.service_account_token_create(
        account=account, name="x", scopes=[TokenScope.READ], user=ops2, reason=REASON
    )
    assert selectors.service_account_people(account) == {ops.pk, ops2.pk, lead.pk}
    detail = _api(lead).get(reverse("api_service_account_detail", args=[account.pk])).json()
    assert detail["managers"] == ["lead", "ops", "ops2"]


def test_a_person_is_never_behind_another_person(ops, ops2):
    assert selectors.stands_behind(user=ops, authors=[ops2, None]) is None
    assert selectors.people_behind(ops2) == {ops2.pk}
