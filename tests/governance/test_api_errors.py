"""``governance.apis.exception_handler``: errors from services become DRF responses."""

import pytest
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.http import Http404

from governance import services
from governance.toolkit.api import exception_handler
from tests.conftest import REASON


def handle(exc: Exception):
    return exception_handler(exc, {})


def test_service_validation_error_is_400_by_field(world):
    with pytest.raises(ValidationError) as raised:
        services.quota_create(
            user=world.ops,
            reason=REASON,
            project=world.speech,
            pool=world.inference,
            flavor=world.a100,
            guarantee=4,
            lending_limit=6,
            preemption_class=world.allowed,
        )

    response = handle(raised.value)

    assert response.status_code == 400
    assert response.data["error"] == "invalid"
    assert list(response.data["fields"]) == ["lending_limit"]
    (message,) = response.data["fields"]["lending_limit"]
    assert response.data["detail"] == message
    assert "6" in message and "4" in message  # the numbers are named


def test_non_field_errors_are_under_non_field_errors():
    response = handle(
        ValidationError(
            {NON_FIELD_ERRORS: ["Pick one."], "guarantee": ["Too many GPUs.", "Not even."]}
        )
    )

    assert response.status_code == 400
    assert response.data == {
        "error": "invalid",
        "detail": "The input is invalid.",
        "fields": {
            "non_field_errors": ["Pick one."],
            "guarantee": ["Too many GPUs.", "Not even."],
        },
    }


def test_error_without_field_is_a_non_field_error():
    response = handle(ValidationError("Capacity is %(gpus)d GPUs.", params={"gpus": 8}))

    assert response.status_code == 400
    assert response.data == {
        "error": "invalid",
        "detail": "Capacity is 8 GPUs.",
        "fields": {"non_field_errors": ["Capacity is 8 GPUs."]},
    }


def test_permission_denied_from_a_service_is_403_with_its_message(world, member):
    with pytest.raises(PermissionDenied) as raised:
        services.project_create(user=member, reason=REASON, slug="x", name="X")

    response = handle(raised.value)

    assert response.status_code == 403
    assert response.data["error"] == "permission_denied"
    assert response.data["fields"] == {}
    assert response.data["detail"] == str(raised.value)
    assert response.data["detail"]


def test_http404_is_404():
    response = handle(Http404())

    assert response.status_code == 404
    assert response.data["error"] == "not_found"


def test_other_exceptions_are_left_to_django():
    assert handle(RuntimeError("boom")) is None


def test_an_api_address_that_matches_nothing_is_a_json_404(client):
    response = client.get("/api/v1/changes/null,null/")
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "detail": "Not found.", "fields": {}}
    assert "text/html" in client.get("/no-such-page/")["Content-Type"]
