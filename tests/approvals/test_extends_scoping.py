"""``extends`` tells no one which request ids exist: another project's request and a missing
one get the same answer."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from approvals.models import UpgradeRequest
from tests.approvals.conftest import upgrade

pytestmark = pytest.mark.django_db


def test_extends_answers_the_same_for_missing_and_not_yours(world, policies, lead):
    speech = upgrade(world, world.ops)  # speech's request: the vision lead may not read it
    missing = UpgradeRequest.objects.order_by("-pk").first().pk + 1000
    client = APIClient()
    client.force_authenticate(lead)
    answers = []
    for pk in (speech.pk, missing):
        response = client.post(
            reverse("api_request_create"),
            {
                "project": "vision",
                "kind": "queue_jump",
                "tier": "production",
                "job_ids": ["1"],
                "starts_at": "2099-01-01T08:00:00Z",
                "ends_at": "2099-01-02T08:00:00Z",
                "justification": "x",
                "business_impact": "y",
                "extends": pk,
            },
            format="json",
        )
        assert response.status_code == 400
        answers.append(response.json()["fields"]["extends"][0].replace(str(pk), "N"))
    assert answers[0] == answers[1] == "No request #N that you may extend."
