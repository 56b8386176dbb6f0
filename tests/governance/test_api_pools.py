"""GET /api/v1/pools/ and /api/v1/pools/<slug>/."""

import pytest
from django.urls import reverse

from governance import services
from tests.conftest import REASON

LIST = reverse("api_pool_list")


@pytest.fixture
def client(api_client, member):
    api_client.force_login(member)
    return api_client


@pytest.fixture
def child(world):
    kw = {"user": world.ops, "reason": REASON}
    pool = services.pool_create(**kw, slug="training-eu", name="Training EU", parent=world.training)
    services.pool_capacity_set(**kw, pool=pool, flavor=world.a100, gpus=8)
    return pool


def slugs(response) -> list[str]:
    assert response.status_code == 200, response.data
    return [row["slug"] for row in response.data["results"]]


def test_list_shows_each_pool_with_capacities(world, client):
    response = client.get(LIST)

    assert response.status_code == 200
    assert response.data["count"] == 2
    inference, training = response.data["results"]
    assert training == {
        "slug": "training",
        "name": "Training",
        "description": "",
        "parent": None,
        "capacities": [{"flavor": "a100-80g", "gpus": 64}, {"flavor": "h100-80g", "gpus": 32}],
        "project_count": 2,
    }
    assert inference["capacities"] == [{"flavor": "a100-80g", "gpus": 16}]
    assert inference["project_count"] == 0


def test_list_shows_the_parent(world, client, child):
    rows = {row["slug"]: row for row in client.get(LIST).data["results"]}
    assert rows["training-eu"]["parent"] == "training"
    assert rows["training"]["parent"] is None


def test_detail_shows_guarantees_and_child_pools(world, client, child):
    response = client.get(reverse("api_pool_detail", args=["training"]))

    assert response.status_code == 200
    assert response.data == {
        "slug": "training",
        "name": "Training",
        "description": "",
        "parent": None,
        "capacities": [
            {"flavor": "a100-80g", "gpus": 64, "guaranteed": 40, "child_pools": 8, "free": 16},
            {"flavor": "h100-80g", "gpus": 32, "guaranteed": 0, "child_pools": 0, "free": 32},
        ],
    }


def test_detail_of_child_pool(world, client, child):
    response = client.get(reverse("api_pool_detail", args=["training-eu"]))

    assert response.data["parent"] == "training"
    assert response.data["capacities"] == [
        {"flavor": "a100-80g", "gpus": 8, "guaranteed": 0, "child_pools": 0, "free": 8}
    ]


def test_filter_by_parent(world, client, child):
    assert slugs(client.get(LIST, {"parent": "training"})) == ["training-eu"]
    assert slugs(client.get(LIST, {"parent": "inference"})) == []


def test_unknown_parent_is_400(world, client):
    response = client.get(LIST, {"parent": "nowhere"})

    assert response.status_code == 400
    assert list(response.data["fields"]) == ["parent"]
