"""Who may call the read API, and how: session and token, never anonymously."""

import pytest
from django.urls import reverse

from tests.conftest import login, token_for

LIST_ROUTES = [
    "api_project_list",
    "api_flavor_list",
    "api_pool_list",
    "api_tier_list",
    "api_preemption_class_list",
    "api_quota_list",
]


def detail_urls(world) -> list[str]:
    return [
        reverse("api_project_detail", args=[world.vision.slug]),
        reverse("api_flavor_detail", args=[world.a100.slug]),
        reverse("api_pool_detail", args=[world.training.slug]),
        reverse("api_tier_detail", args=[world.production.slug]),
        reverse("api_preemption_class_detail", args=[world.cautious.slug]),
        reverse("api_quota_detail", args=[world.vision_a100.pk]),
    ]


def all_urls(world) -> list[str]:
    return [reverse(name) for name in LIST_ROUTES] + detail_urls(world)


def test_anonymous_requests_are_refused_with_401(world, api_client):
    # Token authentication is the first authentication class, so DRF answers with a 401 and
    # a challenge that tells a CI client how to authenticate.
    for url in all_urls(world):
        response = api_client.get(url)
        assert response.status_code == 401, url
        assert response.data["error"] == "not_authenticated"
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="api"'


def test_token_authentication_works_on_every_endpoint(world, api_client, ci_token):
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {ci_token.key}")
    for url in all_urls(world):
        assert api_client.get(url).status_code == 200, url


def test_session_authentication_works_on_every_endpoint(world, outsider):
    client = login(outsider)  # a member of no project still reads every rule
    for url in all_urls(world):
        response = client.get(url)
        assert response.status_code == 200, url
        assert response["Content-Type"] == "application/json"


def test_unknown_token_is_refused(world, api_client):
    api_client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    response = api_client.get(reverse("api_quota_list"))
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="api"'
    api_client.credentials(HTTP_AUTHORIZATION="Bearer arb_00000000_" + "0" * 43)
    response = api_client.get(reverse("api_quota_list"))
    assert response.status_code == 401
    assert response.data["error"] == "authentication_failed"


def test_token_of_deactivated_account_is_refused(world, api_client, ci_token):
    ci_token.user.is_active = False
    ci_token.user.save()
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {ci_token.key}")
    response = api_client.get(reverse("api_quota_list"))
    assert response.status_code == 401
    assert response.data["error"] == "authentication_failed"


def test_token_belongs_to_its_user(world, api_client, member):
    api_client.credentials(HTTP_AUTHORIZATION=token_for(member))
    response = api_client.get(reverse("api_project_list"), {"member": "member"})
    assert response.status_code == 200
    assert [project["slug"] for project in response.data["results"]] == ["vision"]


@pytest.mark.parametrize(
    ("route", "arg"),
    [
        ("api_project_detail", "nope"),
        ("api_flavor_detail", "nope"),
        ("api_pool_detail", "nope"),
        ("api_tier_detail", "nope"),
        ("api_preemption_class_detail", "nope"),
        ("api_quota_detail", 999999),
    ],
)
def test_unknown_object_is_404(world, api_client, member, route, arg):
    api_client.force_login(member)
    response = api_client.get(reverse(route, args=[arg]))
    assert response.status_code == 404
    assert response.data["error"] == "not_found"


@pytest.mark.parametrize("route", LIST_ROUTES)
def test_lists_change_only_through_proposals(world, api_client, ops, route):
    """POST on a rule list proposes a rule change (an empty one is a 400); PUT is no verb."""
    api_client.force_login(ops)
    response = api_client.post(reverse(route), {}, format="json")
    assert response.status_code == 400
    assert "reason" in response.json()["fields"]
    assert api_client.put(reverse(route), {}, format="json").status_code == 405
