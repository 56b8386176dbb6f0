"""No 500 for any input: NUL bytes, over-long values, deep JSON and nonsense query parameters
give a 400 that names the field, on every list filter, every body and the pages."""

import pytest
from django.urls import reverse

from tests.conftest import login

pytestmark = pytest.mark.django_db

NUL = "\x00"

FILTERS = [
    ("api_quota_list", "project"),
    ("api_quota_list", "pool"),
    ("api_quota_list", "flavor"),
    ("api_pool_list", "parent"),
    ("api_project_list", "member"),
    ("api_project_list", "tier"),
    ("api_request_list", "requester"),
    ("api_request_list", "project"),
    ("api_change_list", "author"),
    ("api_change_list", "object"),
    ("api_tier_list", "owner"),
    ("api_flavor_list", "search"),
]


@pytest.mark.parametrize("value", [NUL, "vision" + NUL, "x" * 5000])
def test_a_nul_byte_or_an_over_long_filter_is_a_400_naming_it(world, api_client, value):
    api_client.force_authenticate(world.ops)
    for name, parameter in FILTERS:
        response = api_client.get(reverse(name), {parameter: value})
        assert response.status_code == 400, (name, parameter)
        assert parameter in response.json()["fields"]


PAGING = [
    ("limit", "%"),
    ("limit", "null"),
    ("limit", ""),
    ("limit", "0"),
    ("limit", "-1"),
    ("offset", "null"),
    ("offset", "%"),
    ("offset", "-3"),
    ("offset", "1.5"),
]
LISTS = [
    "api_quota_list",
    "api_pool_list",
    "api_flavor_list",
    "api_tier_list",
    "api_project_list",
    "api_preemption_class_list",
    "api_change_list",
    "api_request_list",
    "api_cluster_list",
]


@pytest.mark.parametrize("name", LISTS)
def test_nonsense_paging_parameters_are_a_400(world, api_client, name):
    api_client.force_authenticate(world.ops)
    for parameter, value in PAGING:
        response = api_client.get(reverse(name), {parameter: value})
        assert response.status_code == 400, (parameter, value)
        assert parameter in response.json()["fields"]


def test_good_paging_parameters_still_page(world, api_client):
    api_client.force_authenticate(world.ops)
    response = api_client.get(reverse("api_quota_list"), {"limit": "1", "offset": "1"})
    assert response.status_code == 200
    assert len(response.json()["results"]) == 1


def test_a_bad_instant_is_a_400(world, api_client):
    api_client.force_authenticate(world.ops)
    for value in ["", "null", "tomorrow", NUL]:
        response = api_client.get(
            reverse("api_project_effective_rules", args=["vision"]), {"at": value}
        )
        assert response.status_code == 400, value
        assert "at" in response.json()["fields"]


@pytest.mark.parametrize("field", ["project", "pool", "flavor", "tier", "preemption_class"])
def test_nul_slugs_in_a_request_are_a_400(ops, api_client, field):
    api_client.force_authenticate(ops)
    body = {
        "project": "vision",
        "kind": "quota_exception",
        "justification": "x",
        "business_impact": "y",
        "starts_at": "2030-01-01T00:00:00Z",
        "ends_at": "2030-01-02T00:00:00Z",
        field: "vision" + NUL,
    }
    response = api_client.post(reverse("api_request_create"), body, format="json")
    assert response.status_code == 400
    assert field in response.json()["fields"]


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deeply_nested_json_is_a_400(ops, api_client, depth):
    api_client.force_authenticate(ops)
    body = "[" * depth + "]" * depth
    response = api_client.post(reverse("api_change_propose"), body, content_type="application/json")
    assert response.status_code == 400


def test_a_nul_key_in_json_is_a_400(ops, api_client):
    api_client.force_authenticate(ops)
    response = api_client.post(
        reverse("api_change_propose"), {"reason": "x", "edits": [], NUL: 1}, format="json"
    )
    assert response.status_code == 400


PAGE_URLS = [
    "/projects/?q=%00",
    "/quotas/?project=%00",
    "/changes/?author=%00",
    "/requests/?requester=%00",
    "/people/%00/",
    "/people/?q=" + "x" * 5000,
]


def test_pages_answer_a_nul_byte_with_a_400(ops):
    client = login(ops)
    for url in PAGE_URLS:
        assert client.get(url).status_code == 400, url


def test_a_page_form_with_a_nul_byte_is_a_400_and_saves_nothing(world):
    client = login(world.ops)
    response = client.post(
        reverse("membership_edit", args=["vision"]),
        {"action": "set", "set-member": "1\x00", "set-role": "member", "set-reason": "x"},
    )
    assert response.status_code == 400
    assert "set-member" in response.content.decode()
    assert world.vision.memberships.count() == 2
