"""Four eyes on requests across identities: a request filed through a project's service
account counts as filed by the people behind it (who made the account, who minted its tokens,
the project's leads); none of them decides it."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from approvals.models import RequestStage, UpgradeRequest
from governance import services as governance_services
from tests.conftest import REASON

pytestmark = pytest.mark.django_db
RULE = "Four eyes"


def _client(user=None, key: str | None = None) -> APIClient:
    client = APIClient()
    if key is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    else:
        client.force_authenticate(user)
    return client


def test_ops_cannot_approve_an_exception_filed_through_a_token_they_minted(
    world, policies, lead, ops, ops2
):
    """Chain 3: ops mints a token for the lead's project account, files a 16-GPU exception as
    it, and cannot approve it; a second ops person can."""
    account = governance_services.service_account_create(
        project=world.vision, username="vision-ci", user=lead, reason=REASON
    )
    token = governance_services.service_account_token_create(
        account=account, name="CI", scopes=["read", "request"], user=ops, reason=REASON
    )
    # Its request scope waits for a second person: the token does not work yet.
    refused = _client(key=token.key).get(reverse("api_project_list"))
    assert refused.status_code == 401 and "second person" in refused.json()["detail"]
    governance_services.api_token_approve(token=token, user=ops2)
    filed = _client(key=token.key).post(
        reverse("api_request_create"),
        {
            "project": "vision",
            "kind": "quota_exception",
            "pool": world.training.slug,
            "flavor": world.a100.slug,
            "extra_gpus": 16,
            "starts_at": "2099-01-01T08:00:00Z",
            "ends_at": "2099-01-03T08:00:00Z",
            "justification": "Ablations",
            "business_impact": "The paper slips",
        },
        format="json",
    )
    assert filed.status_code == 201, filed.json()
    pk = filed.json()["id"]
    refused = _client(ops).post(reverse("api_request_approve", args=[pk]), {}, format="json")
    assert refused.status_code == 403
    assert RULE in refused.json()["detail"] and "vision-ci" in refused.json()["detail"]
    assert UpgradeRequest.objects.get(pk=pk).stage == RequestStage.SUBMITTED
    approved = _client(ops2).post(reverse("api_request_approve", args=[pk]), {}, format="json")
    assert approved.status_code == 200, approved.json()
