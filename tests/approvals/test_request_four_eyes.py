"""Four eyes on requests across identities: a request filed through a project's service
account counts as filed by the people behind it (who made the account, who minted its tokens,
the project's leads); none of them decides it."""

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from approvals import services
from approvals.models import RequestStage, UpgradeRequest
from governance import services as governance_services
from tests.approvals.conftest import quota_exception
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


def test_ops_who_submits_a_members_draft_cannot_approve_it(world, policies, lead, ops, ops2):
    """Submit-then-approve: the lead drafts a quota exception, ops submits it and counts as
    one of its authors from then on: their approval is refused naming four eyes, a second
    ops person decides it."""
    draft = quota_exception(world, lead, submit=False, now=None)
    assert draft.stage == RequestStage.DRAFT
    submitted = _client(ops).post(reverse("api_request_submit", args=[draft.pk]), {}, format="json")
    assert submitted.status_code == 200, submitted.json()
    assert UpgradeRequest.objects.get(pk=draft.pk).submitted_by == ops
    refused = _client(ops).post(reverse("api_request_approve", args=[draft.pk]), {}, format="json")
    assert refused.status_code == 403
    assert RULE in refused.json()["detail"] and "submitted" in refused.json()["detail"]
    assert UpgradeRequest.objects.get(pk=draft.pk).stage == RequestStage.SUBMITTED
    # Nor through the page.
    client = Client()
    client.force_login(ops)
    page = client.post(reverse("request_approve", args=[draft.pk]), {"comment": ""})
    assert page.status_code in (302, 403)
    assert UpgradeRequest.objects.get(pk=draft.pk).approvals.count() == 0
    approved = _client(ops2).post(
        reverse("api_request_approve", args=[draft.pk]), {}, format="json"
    )
    assert approved.status_code == 200, approved.json()
    assert UpgradeRequest.objects.get(pk=draft.pk).stage == RequestStage.APPROVED


def test_the_requester_submitting_their_own_draft_leaves_ops_deciding(world, policies, lead, ops):
    draft = quota_exception(world, lead, submit=False, now=None)
    services.request_submit(request=draft, user=lead)
    approved = _client(ops).post(reverse("api_request_approve", args=[draft.pk]), {}, format="json")
    assert approved.status_code == 200, approved.json()
