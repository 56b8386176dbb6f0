"""GET /api/v1/flavors/ and /api/v1/flavors/<slug>/."""

import pytest
from django.urls import reverse

LIST = reverse("api_flavor_list")


@pytest.fixture
def client(api_client, member):
    api_client.force_login(member)
    return api_client


def slugs(response) -> list[str]:
    assert response.status_code == 200, response.data
    return [row["slug"] for row in response.data["results"]]


def test_list_shows_each_flavor_with_its_total(world, client):
    response = client.get(LIST)

    assert response.status_code == 200
    assert response.data["count"] == 2
    a100, h100 = response.data["results"]
    assert a100 == {
        "slug": "a100-80g",
        "name": "A100 80G",
        "gpu_model": "NVIDIA A100",
        "memory_gb": 80,
        "gres_type": "a100",
        "node_labels": {"gpu.example.com/model": "a100"},
        "node_taints": [],
        "total_gpus": 80,  # 64 in training + 16 in inference
    }
    assert h100["slug"] == "h100-80g"
    assert h100["node_labels"] == {}
    assert h100["total_gpus"] == 32


def test_detail_shows_capacity_per_pool(world, client):
    response = client.get(reverse("api_flavor_detail", args=["a100-80g"]))

    assert response.status_code == 200
    assert response.data["gpu_model"] == "NVIDIA A100"
    assert response.data["gres_type"] == "a100"
    assert response.data["pools"] == [
        {"pool": "inference", "gpus": 16, "guaranteed": 0, "child_pools": 0, "free": 16},
        {"pool": "training", "gpus": 64, "guaranteed": 40, "child_pools": 0, "free": 24},
    ]


def test_search(world, client):
    assert slugs(client.get(LIST, {"q": "h100"})) == ["h100-80g"]
    assert slugs(client.get(LIST, {"q": "nvidia"})) == ["a100-80g", "h100-80g"]
    assert slugs(client.get(LIST, {"q": "tpu"})) == []


def test_overlong_search_is_400(world, client):
    response = client.get(LIST, {"q": "x" * 101})

    assert response.status_code == 400
    assert list(response.data["fields"]) == ["q"]
