"""The whole CI flow over HTTP against a live server, with a service account's token:
placement → submit options → a queue-jump request (retried with the same Idempotency-Key:
one request) → approval by a person → the grant in force.

Real parts: Django's live server (a thread serving real HTTP), the test database, tokens
made by the same services as the pages. Not run: ``sbatch`` itself (no Slurm here); the
test checks the options a pipeline would pass to it.
"""

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from approvals.models import IdempotencyKey, UpgradeRequest
from governance import services
from queues import services as queue_services
from tests.approvals.conftest import policies, second_ops  # noqa: F401  (fixtures)
from tests.conftest import REASON

pytestmark = pytest.mark.django_db(transaction=True)


class Api:
    def __init__(self, base: str, token: str) -> None:
        self.base, self.token = base, token

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any, Any]:
        url = self.base + path + ("?" + urllib.parse.urlencode(query) if query else "")
        request = urllib.request.Request(
            url,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                **(headers or {}),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.load(response), response.headers
        except urllib.error.HTTPError as error:
            return error.code, json.load(error), error.headers


@pytest.fixture
def served(world, policies, settings):  # noqa: F811
    """The world served by a Slurm cluster, so placement names the sbatch options."""
    settings.ARBITER_API_THROTTLE = False
    queue_services.cluster_create(
        user=world.ops,
        reason=REASON,
        name="hpc",
        slurm_cluster="hpc",
        pools=[world.training, world.inference],
    )
    return world


def test_a_pipeline_places_files_once_and_gets_its_grant(served, live_server, lead, approver, ops):
    base = live_server.url
    # The project's lead makes the pipeline's account and token through the API.
    lead_token = services.personal_token_create(
        user=lead, name="laptop", scopes=["read", "request"]
    )
    as_lead = Api(base, lead_token.key)
    status, account, _h = as_lead.call(
        "POST",
        "/api/v1/service-accounts/create/",
        {"username": "vision-ci", "project": "vision", "reason": "Release pipeline"},
    )
    assert status == 201, account
    status, token, _h = as_lead.call(
        "POST",
        f"/api/v1/service-accounts/{account['id']}/tokens/create/",
        {"name": "release pipeline", "scopes": ["read", "request"]},
    )
    assert status == 201, token
    # Its request scope is a governed change: ops (not behind the account) approve it.
    ops_token = services.personal_token_create(user=ops, name="laptop", scopes=["read", "request"])
    status, approved, _h = Api(base, ops_token.key).call(
        "POST",
        f"/api/v1/service-accounts/{account['id']}/tokens/{token['id']}/approve/",
    )
    assert status == 200 and approved["approved_by"] == "ops", approved
    ci = Api(base, token["key"])

    # Placement: allowed, with the exact sbatch options.
    status, place, _h = ci.call(
        "GET",
        "/api/v1/placement/",
        query={"project": "vision", "gpus": 8, "tier": "key", "flavor": "a100-80g"},
    )
    assert status == 200, place
    assert place["allowed"] is True, place["refusals"]
    (route,) = place["slurm"]
    assert route["cluster"] == "hpc"
    options = route["sbatch_options"]
    assert any(option.startswith("--account=") for option in options)
    assert any(option.startswith("--qos=") for option in options)
    assert "--gres=gpu:a100:8" in options
    job_id = "48213"  # what `sbatch --parsable <options> train.sbatch` would print

    # A queue-jump request, retried with the same key: one request, the same answer.
    starts = timezone.now() + timedelta(minutes=5)
    body = {
        "project": "vision",
        "kind": "queue_jump",
        "tier": "production",
        "job_ids": [job_id],
        "starts_at": starts.isoformat(),
        "ends_at": (starts + timedelta(days=1)).isoformat(),
        "justification": "Release candidate evaluation blocks the release",
        "business_impact": "The release slips a day without it",
    }
    headers = {
        "Idempotency-Key": "gitlab-1234-train",
        "X-Pipeline-Run-URL": "https://gitlab.example.org/vision/-/jobs/1234",
    }
    status, first, first_headers = ci.call(
        "POST", "/api/v1/requests/create/", body, headers=headers
    )
    assert status == 201, first
    assert "Idempotent-Replayed" not in first_headers
    status, again, again_headers = ci.call(
        "POST", "/api/v1/requests/create/", body, headers=headers
    )
    assert status == 201 and again == first
    assert again_headers["Idempotent-Replayed"] == "true"
    assert UpgradeRequest.objects.count() == 1 and IdempotencyKey.objects.count() == 1
    status, conflict, _h = ci.call(
        "POST", "/api/v1/requests/create/", {**body, "job_ids": ["1"]}, headers=headers
    )
    assert status == 409 and conflict["error"] == "conflict"
    assert first["state"] == "submitted" and first["requester"] == "vision-ci"

    # The pipeline polls; it can never decide its own request.
    status, polled, _h = ci.call("GET", f"/api/v1/requests/{first['id']}/")
    assert (status, polled["state"]) == (200, "submitted")
    status, refused, _h = ci.call("POST", f"/api/v1/requests/{first['id']}/approve/", {})
    assert status == 403, refused

    # A person (the tier's owner) approves it, with their own token.
    approver_token = services.personal_token_create(
        user=approver, name="laptop", scopes=["read", "request"]
    )
    status, approved, _h = Api(base, approver_token.key).call(
        "POST", f"/api/v1/requests/{first['id']}/approve/", {"comment": "Go"}
    )
    assert status == 200, approved

    # The pipeline sees the decision and the grant in force once it starts.
    status, polled, _h = ci.call("GET", f"/api/v1/requests/{first['id']}/")
    assert polled["state"] == "approved" and polled["grant"] is not None
    at = (starts + timedelta(hours=1)).isoformat()
    status, grants, _h = ci.call("GET", "/api/v1/grants/", query={"project": "vision", "at": at})
    assert status == 200, grants
    (grant,) = grants["results"]
    assert (grant["kind"], grant["job_ids"], grant["request"], grant["in_force"]) == (
        "queue_jump",
        [job_id],
        first["id"],
        True,
    )
    status, rules, _h = ci.call("GET", "/api/v1/projects/vision/effective/", query={"at": at})
    assert rules["job_tiers"] == {job_id: "production"}
    status, before, _h = ci.call(
        "GET", "/api/v1/grants/", query={"project": "vision", "at": timezone.now().isoformat()}
    )
    assert before["count"] == 0
