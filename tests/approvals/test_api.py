"""The requests API: list filters, detail, inbox, counts, submit and withdraw; the lists read
in a fixed number of queries."""

import pytest
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator

import approvals.urls
from approvals import services
from tests.approvals.conftest import HOUR, T0, quota_exception, upgrade
from tests.conftest import token_for

pytestmark = pytest.mark.django_db


def _grow(world, lead, approver, count: int) -> None:
    for index in range(count):
        quota_exception(world, lead, extra_gpus=index + 1)
        half = upgrade(world, lead, project=world.vision, tier=world.production)
        services.request_approve(request=half, user=approver, now=T0 - HOUR)


def _rows(data):
    return data["results"] if isinstance(data, dict) else data


def test_anonymous_clients_get_401(api_client):
    assert api_client.get(reverse("api_request_list")).status_code == 401
    assert api_client.get(reverse("api_inbox")).status_code == 401


def test_the_list_filters(world, policies, lead, approver, api_client):
    _grow(world, lead, approver, 1)
    api_client.force_authenticate(lead)
    url = reverse("api_request_list")
    assert api_client.get(url).json()["count"] == 2
    submitted = api_client.get(url, {"state": "submitted", "kind": "quota_exception"}).json()
    assert [row["kind"] for row in submitted["results"]] == ["quota_exception"]
    assert api_client.get(url, {"project": "speech"}).json()["count"] == 0
    assert api_client.get(url, {"requester": "lead"}).json()["count"] == 2
    bad = api_client.get(url, {"state": "maybe", "project": "nope"})
    assert bad.status_code == 400
    assert set(bad.json()["fields"]) == {"state", "project"}


@pytest.mark.parametrize(
    ("route", "queries"),
    [
        # token with its user, count, the page, approvals, approvers
        ("api_request_list", 5),
        # token with its user, count, pending requests, approvals, approvers
        ("api_inbox", 5),
    ],
)
def test_lists_cost_a_fixed_number_of_queries(
    world,
    policies,
    lead,
    ops,
    approver,
    api_client,
    django_assert_num_queries,
    route,
    queries,
):
    api_client.credentials(HTTP_AUTHORIZATION=token_for(ops))
    api_client.get(reverse(route))  # the token's first use in a minute records it (one write)
    _grow(world, lead, approver, 1)
    with django_assert_num_queries(queries):
        first = api_client.get(reverse(route)).json()
    _grow(world, lead, approver, 5)
    with django_assert_num_queries(queries):
        more = api_client.get(reverse(route)).json()
    assert len(_rows(more)) > len(_rows(first)) > 0


def test_the_inbox_carries_the_evidence(world, policies, lead, ops, api_client):
    request = quota_exception(world, lead)
    api_client.force_authenticate(ops)
    [row] = api_client.get(reverse("api_inbox")).json()["results"]
    assert row["id"] == request.pk
    assert row["evidence"]["quotas"][0]["maximum"] == 40
    assert row["approvers"] == "ops"
    api_client.force_authenticate(lead)
    assert api_client.get(reverse("api_inbox")).json()["results"] == []


def test_the_counts_the_navigation_shows(world, policies, lead, ops, api_client):
    quota_exception(world, lead)
    api_client.force_authenticate(ops)
    assert api_client.get(reverse("api_notification_counts")).json() == {"unread": 1, "inbox": 1}
    api_client.force_authenticate(lead)
    assert api_client.get(reverse("api_notification_counts")).json() == {"unread": 0, "inbox": 0}


def test_a_draft_is_submitted_then_withdrawn(world, policies, lead, member, api_client):
    draft = quota_exception(world, lead, submit=False)
    api_client.force_authenticate(member)
    assert api_client.post(reverse("api_request_submit", args=[draft.pk])).status_code == 403
    api_client.force_authenticate(lead)
    submitted = api_client.post(reverse("api_request_submit", args=[draft.pk]))
    assert submitted.status_code == 200, submitted.json()
    assert submitted.json()["state"] == "submitted"
    again = api_client.post(reverse("api_request_submit", args=[draft.pk]))
    assert again.status_code == 400
    withdrawn = api_client.post(
        reverse("api_request_withdraw", args=[draft.pk]), {"comment": "Found GPUs"}
    )
    assert withdrawn.json()["state"] == "withdrawn"
    [event] = [e for e in withdrawn.json()["events"] if e["action"] == "withdrawn"]
    assert (event["actor"], event["comment"]) == ("lead", "Found GPUs")


def test_unknown_requests_are_404(ops, api_client):
    api_client.force_authenticate(ops)
    assert api_client.get(reverse("api_request_detail", args=[999999])).status_code == 404
    assert api_client.post(reverse("api_request_approve", args=[999999])).status_code == 404


def test_the_schema_describes_the_requests_api():
    generator = SchemaGenerator(patterns=approvals.urls.urlpatterns)
    schema = generator.get_schema(request=None, public=True)
    assert {
        "/api/v1/requests/",
        "/api/v1/requests/create/",
        "/api/v1/requests/{id}/approve/",
        "/api/v1/inbox/",
    } <= set(schema["paths"])
    approve = schema["paths"]["/api/v1/requests/{id}/approve/"]["post"]
    assert {"200", "400", "403", "404"} <= set(approve["responses"])
