"""GET /api/v1/quotas/ and /api/v1/quotas/<pk>/, and how every list pages."""

import pytest
from django.urls import reverse

from governance import services
from tests.conftest import REASON

LIST = reverse("api_quota_list")


@pytest.fixture
def client(api_client, ci_token):
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {ci_token.key}")
    return api_client


def ids(response) -> list[int]:
    assert response.status_code == 200, response.data
    return [row["id"] for row in response.data["results"]]


def test_detail_shows_every_limit(world, client):
    response = client.get(reverse("api_quota_detail", args=[world.vision_a100.pk]))

    assert response.status_code == 200
    assert response.data == {
        "id": world.vision_a100.pk,
        "project": "vision",
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


def test_list_shows_unbounded_quota_as_null(world, client):
    response = client.get(LIST)

    assert response.data["count"] == 2
    speech, vision = response.data["results"]  # ordered by project name
    assert vision["id"] == world.vision_a100.pk
    assert speech == {
        "id": world.speech_a100.pk,
        "project": "speech",
        "pool": "training",
        "flavor": "a100-80g",
        "guarantee": 16,
        "borrow_limit": None,
        "lending_limit": None,
        "maximum": None,
        "fair_share_weight": 1,
        "reclaim_grace_minutes": 0,
        "preemption_class": "allowed",
    }


@pytest.fixture
def vision_h100(world):
    return services.quota_create(
        user=world.ops,
        reason=REASON,
        project=world.vision,
        pool=world.training,
        flavor=world.h100,
        guarantee=8,
        preemption_class=world.forbidden,
    )


def test_filters(world, client, vision_h100):
    vision, speech = world.vision_a100.pk, world.speech_a100.pk
    assert ids(client.get(LIST, {"project": "vision"})) == [vision, vision_h100.pk]
    assert ids(client.get(LIST, {"pool": "training"})) == [speech, vision, vision_h100.pk]
    assert ids(client.get(LIST, {"pool": "inference"})) == []
    assert ids(client.get(LIST, {"flavor": "h100-80g"})) == [vision_h100.pk]
    assert ids(client.get(LIST, {"preemption_class": "allowed"})) == [speech]
    assert ids(client.get(LIST, {"project": "vision", "flavor": "a100-80g"})) == [vision]
    assert ids(client.get(LIST, {"project": "speech", "preemption_class": "forbidden"})) == []


def test_empty_filter_is_ignored(world, client):
    assert len(ids(client.get(LIST, {"project": ""}))) == 2


@pytest.mark.parametrize("field", ["project", "pool", "flavor", "preemption_class"])
def test_unknown_slug_in_filter_is_400(world, client, field):
    response = client.get(LIST, {field: "nope"})

    assert response.status_code == 400
    assert list(response.data["fields"]) == [field]
    assert "nope" in str(response.data["fields"][field][0])


def test_every_bad_filter_is_reported_at_once(world, client):
    response = client.get(LIST, {"project": "nope", "pool": "nowhere"})

    assert response.status_code == 400
    assert sorted(response.data["fields"]) == ["pool", "project"]


def test_pagination(world, client):
    first = client.get(LIST, {"limit": 1})

    assert first.data["count"] == 2
    assert ids(first) == [world.speech_a100.pk]
    assert first.data["previous"] is None
    assert "offset=1" in first.data["next"]
    assert "limit=1" in first.data["next"]

    second = client.get(first.data["next"])

    assert ids(second) == [world.vision_a100.pk]
    assert second.data["next"] is None
    assert second.data["previous"] is not None


def test_pagination_keeps_the_filters(world, client, vision_h100):
    first = client.get(LIST, {"project": "vision", "limit": 1})

    assert first.data["count"] == 2
    assert "project=vision" in first.data["next"]
    assert ids(client.get(first.data["next"])) == [vision_h100.pk]


def test_offset_past_the_end_is_an_empty_page(world, client):
    response = client.get(LIST, {"offset": 10})

    assert response.data["count"] == 2
    assert response.data["results"] == []


@pytest.mark.parametrize("params", [{"limit": "abc"}, {"limit": "-1"}, {"offset": "x"}])
def test_bad_paging_is_a_400_naming_the_parameter(world, client, params):
    response = client.get(LIST, params)

    assert response.status_code == 400
    assert set(response.data["fields"]) == set(params)


def test_a_quota_id_that_is_not_a_number_is_not_routed(world, client):
    assert client.get(LIST + "abc/").status_code == 404
