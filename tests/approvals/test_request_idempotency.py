"""``Idempotency-Key`` on ``POST /api/v1/requests/create/``: a retried pipeline step files
one request; the same key with another body is a 409; keys belong to their principal and
expire. The concurrent retry needs PostgreSQL (the unique constraint makes it wait)."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.models import IdempotencyKey, UpgradeRequest
from approvals.services import idempotency_keys_purge
from tests.conftest import require_service

URL = reverse("api_request_create")


def _body(**overrides):
    body = {
        "project": "vision",
        "kind": "queue_jump",
        "tier": "production",
        "job_ids": ["48213"],
        "starts_at": "2099-01-01T08:00:00Z",
        "ends_at": "2099-01-02T08:00:00Z",
        "justification": "Release gate",
        "business_impact": "The release slips a week",
    }
    return {**body, **overrides}


def _post(client, body, key):
    return client.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_a_retry_with_the_same_key_and_body_answers_as_the_first_and_files_nothing(
    world, policies, api_client, lead
):
    api_client.force_authenticate(lead)
    first = _post(api_client, _body(), "run-77-step-3")
    assert first.status_code == 201, first.json()
    assert "Idempotent-Replayed" not in first

    again = _post(api_client, _body(), "run-77-step-3")

    assert again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert UpgradeRequest.objects.count() == 1
    assert IdempotencyKey.objects.get().response_status == 201


def test_the_same_key_with_another_body_is_a_409(world, policies, api_client, lead):
    api_client.force_authenticate(lead)
    assert _post(api_client, _body(), "k-1").status_code == 201

    other = _post(api_client, _body(job_ids=["1"]), "k-1")

    assert other.status_code == 409
    assert other.json()["error"] == "conflict"
    assert other.json()["fields"] == {}
    assert UpgradeRequest.objects.count() == 1


def test_without_a_key_every_call_files_a_request(world, policies, api_client, lead):
    api_client.force_authenticate(lead)
    assert api_client.post(URL, _body(), format="json").status_code == 201
    assert api_client.post(URL, _body(), format="json").status_code == 201
    assert UpgradeRequest.objects.count() == 2
    assert not IdempotencyKey.objects.exists()


def test_keys_are_per_principal(world, policies, lead, ops):
    from governance import services as governance_services
    from tests.conftest import REASON

    governance_services.membership_set(
        project=world.vision, member=ops, role="lead", user=ops, reason=REASON
    )
    first, second = APIClient(), APIClient()
    first.force_authenticate(lead)
    second.force_authenticate(ops)

    assert _post(first, _body(), "shared").status_code == 201
    assert _post(second, _body(), "shared").status_code == 201

    assert UpgradeRequest.objects.count() == 2


def test_a_refused_call_keeps_no_key(world, policies, api_client, lead):
    api_client.force_authenticate(lead)
    bad = _post(api_client, _body(kind="bribe"), "k-2")
    assert bad.status_code == 400
    assert bad.json()["error"] == "invalid" and "kind" in bad.json()["fields"]
    assert not IdempotencyKey.objects.exists()

    assert _post(api_client, _body(), "k-2").status_code == 201


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", "a\tb"])
def test_a_bad_key_is_a_400_naming_the_header(world, policies, api_client, lead, key):
    api_client.force_authenticate(lead)
    response = _post(api_client, _body(), key)
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["Idempotency-Key"]
    assert not UpgradeRequest.objects.exists()


def test_an_expired_key_files_again_and_the_purge_deletes_old_keys(
    world, policies, api_client, lead, settings
):
    api_client.force_authenticate(lead)
    assert _post(api_client, _body(), "k-3").status_code == 201
    row = IdempotencyKey.objects.get()
    assert row.expires_at - row.created_at == timedelta(
        hours=settings.ARBITER_IDEMPOTENCY_KEY_HOURS
    )
    IdempotencyKey.objects.filter(pk=row.pk).update(
        created_at=timezone.now() - timedelta(days=3), expires_at=timezone.now()
    )

    assert _post(api_client, _body(), "k-3").status_code == 201
    assert UpgradeRequest.objects.count() == 2
    assert idempotency_keys_purge(now=timezone.now() + timedelta(days=30)) == 1
    assert not IdempotencyKey.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_file_one_request(world, policies, lead):
    require_service(
        "PostgreSQL",
        connection.vendor == "postgresql",
        "concurrent inserts wait on the unique constraint: set DATABASE_URL=postgres://...",
    )
    barrier = threading.Barrier(4)
    answers: list[tuple[int, dict]] = []

    def retry() -> None:
        client = APIClient()
        client.force_authenticate(lead)
        try:
            barrier.wait(timeout=10)
            response = _post(client, _body(), "run-9-step-1")
            answers.append((response.status_code, response.json()))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=retry) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert [status for status, _body in answers] == [201] * 4
    assert len({body["id"] for _status, body in answers}) == 1
    assert UpgradeRequest.objects.count() == 1
    assert IdempotencyKey.objects.count() == 1
