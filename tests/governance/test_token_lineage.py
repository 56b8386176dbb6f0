"""Tokens end with their parent: a token made with a token never outlives it nor may more;
revoking it revokes what it made; deactivation and a role removed revoke a person's tokens."""

from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from rest_framework.test import APIClient

from governance import services
from governance.models import ApiToken, ProjectRole
from governance.services import EditSpec

pytestmark = pytest.mark.django_db


def _bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def _mint(key: str, **body) -> dict:
    response = _bearer(key).post(
        reverse("api_token_create"), {"name": "child", **body}, format="json"
    )
    return {"status": response.status_code, **response.json()}


def test_a_token_cannot_mint_a_longer_lived_nor_stronger_token(member):
    parent = services.personal_token_create(
        user=member, name="one day", scopes=["read", "request"], expires_in_days=1
    )
    longer = _mint(parent.key, scopes=["read"], expires_in_days=365)
    assert longer["status"] == 400
    assert "outlives" in longer["fields"]["expires_in_days"][0]
    stronger = _mint(parent.key, scopes=["read", "sync"])
    assert stronger["status"] == 400 and "more scopes" in stronger["fields"]["scopes"][0]
    # By default a child ends with its parent.
    child = _mint(parent.key, scopes=["read", "request"])
    assert child["status"] == 201
    made = ApiToken.objects.get(pk=child["id"])
    assert made.parent_id == parent.pk and made.expires_at == parent.expires_at
    assert made.expires_at - made.created_at <= timedelta(days=1)


def test_revoking_a_token_revokes_what_it_minted_down_the_line(member):
    parent = services.personal_token_create(user=member, name="p", scopes=["read", "request"])
    child = _mint(parent.key, scopes=["read", "request"])
    grandchild = _mint(child["key"], scopes=["read"])
    assert _bearer(grandchild["key"]).get(reverse("api_project_list")).status_code == 200
    services.api_token_revoke(token=parent, user=member)
    for key in (parent.key, child["key"], grandchild["key"]):
        refused = _bearer(key).get(reverse("api_project_list"))
        assert refused.status_code == 401 and "revoked" in refused.json()["detail"]
    # Nor can the revoked child mint more.
    assert _mint(child["key"], scopes=["read"])["status"] == 401


def test_deactivation_and_a_role_removed_revoke_the_persons_tokens(
    world, ops, ops2, lead, django_capture_on_commit_callbacks
):
    lead.email = "lead@example.com"
    lead.save()
    token = services.personal_token_create(user=lead, name="laptop", scopes=["read"])
    with django_capture_on_commit_callbacks(execute=True):
        services.membership_set(
            project=world.vision,
            member=lead,
            role=ProjectRole.MEMBER,
            user=ops,
            reason="Rotation",
        )
    token.refresh_from_db()
    assert token.revoked_at is not None and token.revoked_by == ops
    assert "role removed" in token.history.first().history_change_reason
    (notice,) = mail.outbox
    assert notice.to == ["lead@example.com"] and "1 API token(s)" in notice.body

    again = services.personal_token_create(user=lead, name="laptop", scopes=["read"])
    change = services.rule_change_create(
        user=ops, reason="Left", edits=[EditSpec(target=lead, field="is_active", value=False)]
    )
    services.rule_change_approve(change=change, user=ops2)
    services.rule_change_apply(change=change, user=ops2)
    again.refresh_from_db()
    assert again.revoked_at is not None
    assert "Deactivated" in again.history.first().history_change_reason
