"""GET /api/v1/projects/ and /api/v1/projects/<slug>/."""

import pytest
from django.urls import reverse

LIST = reverse("api_project_list")


@pytest.fixture
def client(api_client, member):
    api_client.force_login(member)
    return api_client


def slugs(response) -> list[str]:
    assert response.status_code == 200, response.data
    return [row["slug"] for row in response.data["results"]]


def test_list_shows_each_project(world, client):
    response = client.get(LIST)

    assert response.status_code == 200
    assert response.data["count"] == 2
    speech, vision = response.data["results"]  # ordered by name
    assert vision == {
        "slug": "vision",
        "name": "Vision",
        "description": "",
        "tier": "key",
        "leads": ["lead"],
        "member_count": 2,
        "guaranteed_gpus": 24,
    }
    assert speech["tier"] is None  # on the default tier
    assert speech["leads"] == []
    assert speech["member_count"] == 0
    assert speech["guaranteed_gpus"] == 16


def test_detail_shows_members_and_quotas(world, client):
    response = client.get(reverse("api_project_detail", args=["vision"]))

    assert response.status_code == 200
    assert response.data == {
        "slug": "vision",
        "name": "Vision",
        "description": "",
        "tier": "key",
        "members": [
            {"username": "lead", "name": "Lead", "role": "lead"},
            {"username": "member", "name": "Member", "role": "member"},
        ],
        "quotas": [
            {
                "id": world.vision_a100.pk,
                "pool": "training",
                "flavor": "a100-80g",
                "guarantee": 24,
                "borrow_limit": 16,
                "lending_limit": 12,
                "maximum": 40,
                "fair_share_weight": 3,
                "reclaim_grace_minutes": 0,
                "preemption_class": "cautious",
            }
        ],
    }


def test_detail_of_project_without_members(world, client):
    response = client.get(reverse("api_project_detail", args=["speech"]))

    assert response.status_code == 200
    assert response.data["tier"] is None
    assert response.data["members"] == []
    assert [quota["id"] for quota in response.data["quotas"]] == [world.speech_a100.pk]


def test_filter_by_tier(world, client):
    assert slugs(client.get(LIST, {"tier": "key"})) == ["vision"]
    assert slugs(client.get(LIST, {"tier": "regular"})) == []  # speech has no tier set


def test_filter_by_member(world, client, outsider):
    assert slugs(client.get(LIST, {"member": "lead"})) == ["vision"]
    assert slugs(client.get(LIST, {"member": "member"})) == ["vision"]
    assert slugs(client.get(LIST, {"member": "outsider"})) == []


def test_filter_by_member_keeps_the_member_count(world, client):
    (vision,) = client.get(LIST, {"member": "lead"}).data["results"]
    assert vision["member_count"] == 2


def test_search(world, client):
    assert slugs(client.get(LIST, {"q": "SPEE"})) == ["speech"]
    assert slugs(client.get(LIST, {"q": "nothing like it"})) == []
    assert slugs(client.get(LIST, {"q": ""})) == ["speech", "vision"]


def test_filters_combine(world, client):
    assert slugs(client.get(LIST, {"tier": "key", "member": "lead", "q": "vis"})) == ["vision"]
    assert slugs(client.get(LIST, {"tier": "key", "q": "speech"})) == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"tier": "platinum"}, "tier"),
        ({"member": "nobody"}, "member"),
        ({"q": "x" * 101}, "q"),
    ],
)
def test_bad_filter_is_400_naming_the_parameter(world, client, params, field):
    response = client.get(LIST, params)

    assert response.status_code == 400
    assert list(response.data["fields"]) == [field]
    assert response.data["fields"][field]
