"""Grants through the API: list (filters, ``?at=`` in force at an instant), read, and a
project's grants as its page shows them."""

from django.urls import reverse

from approvals import services
from tests.approvals.conftest import DAY, HOUR, T0, quota_exception


def _grant(world, lead, ops, **overrides):
    request = quota_exception(world, lead, **overrides)
    request = services.request_approve(request=request, user=ops, now=T0 - HOUR)
    assert request.grant is not None
    return request


def test_grants_in_force_at_an_instant(world, policies, api_client, lead, ops):
    first = _grant(world, lead, ops)
    later = _grant(world, lead, ops, starts_at=T0 + 5 * DAY, ends_at=T0 + 6 * DAY)
    api_client.force_authenticate(lead)
    url = reverse("api_grant_list")

    everything = api_client.get(url).json()
    assert everything["count"] == 2
    at_start = api_client.get(url, {"at": (T0 + HOUR).isoformat()}).json()
    assert [g["id"] for g in at_start["results"]] == [first.grant.pk]
    grant = at_start["results"][0]
    assert (grant["project"], grant["kind"], grant["request"], grant["in_force"]) == (
        "vision",
        "quota_exception",
        first.pk,
        True,
    )
    assert grant["extra_gpus"] == 8 and grant["pool"] == "training"
    at_later = api_client.get(url, {"at": (T0 + 5 * DAY + HOUR).isoformat()}).json()
    assert [g["id"] for g in at_later["results"]] == [later.grant.pk]
    assert api_client.get(url, {"at": (T0 - DAY).isoformat()}).json()["count"] == 0
    assert api_client.get(url, {"project": "speech"}).json()["count"] == 0
    assert api_client.get(url, {"kind": "quota_exception", "limit": 1}).json()["count"] == 2


def test_a_grant_and_a_projects_grants(world, policies, api_client, lead, ops):
    request = _grant(world, lead, ops)
    api_client.force_authenticate(lead)

    detail = api_client.get(reverse("api_grant_detail", args=[request.grant.pk]))
    assert detail.status_code == 200
    assert detail.json()["request"] == request.pk

    url = reverse("api_project_grant_list", args=["vision"])
    before = api_client.get(url, {"at": (T0 - HOUR).isoformat()}).json()
    assert [(g["id"], g["in_force"]) for g in before["results"]] == [(request.grant.pk, False)]
    during = api_client.get(url, {"at": (T0 + HOUR).isoformat()}).json()
    assert [(g["id"], g["in_force"]) for g in during["results"]] == [(request.grant.pk, True)]
    assert api_client.get(url, {"at": (T0 + 4 * DAY).isoformat()}).json()["count"] == 0


def test_bad_input_is_a_400_and_missing_is_a_404(world, policies, api_client, lead):
    api_client.force_authenticate(lead)
    bad = api_client.get(reverse("api_grant_list"), {"at": "soon", "project": "nope", "kind": "x"})
    assert bad.status_code == 400
    assert set(bad.json()["fields"]) == {"at", "project", "kind"}
    empty = api_client.get(reverse("api_project_grant_list", args=["vision"]), {"at": ""})
    assert empty.status_code == 400 and list(empty.json()["fields"]) == ["at"]
    assert api_client.get(reverse("api_grant_detail", args=[999])).status_code == 404
    missing = api_client.get(reverse("api_project_grant_list", args=["nope"]))
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"


def test_anonymous_is_401(world, api_client):
    response = api_client.get(reverse("api_grant_list"))
    assert response.status_code == 401
    assert response.json()["error"] == "not_authenticated"
