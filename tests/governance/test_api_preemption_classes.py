"""GET /api/v1/preemption-classes/ and /api/v1/preemption-classes/<slug>/."""

import pytest
from django.urls import reverse

from governance import services
from tests.conftest import REASON

LIST = reverse("api_preemption_class_list")


@pytest.fixture
def client(api_client, member):
    api_client.force_login(member)
    return api_client


def test_list_shows_each_class_with_its_quota_count(world, client):
    response = client.get(LIST)

    assert response.status_code == 200
    assert response.data["count"] == 3
    rows = {row["slug"]: row for row in response.data["results"]}
    assert rows["cautious"] == {
        "slug": "cautious",
        "name": "Cautious",
        "kind": "cautious",
        "requires_verified_checkpoint": False,
        "max_checkpoint_interval_minutes": None,
        "min_runtime_minutes": 120,
        "max_preemptions_per_day": 1,
        "recovery_owner": None,
        "business_impact": "Long runs; preempt only after 2 h.",
        "quota_count": 1,
    }
    assert rows["allowed"]["requires_verified_checkpoint"] is True
    assert rows["allowed"]["max_checkpoint_interval_minutes"] == 30
    assert rows["allowed"]["quota_count"] == 1
    assert rows["forbidden"]["quota_count"] == 0


def test_detail_shows_the_recovery_owner(world, client, lead):
    services.preemption_class_update(
        preemption_class=world.forbidden,
        user=world.ops,
        reason=REASON,
        data={"recovery_owner": lead},
    )

    response = client.get(reverse("api_preemption_class_detail", args=["forbidden"]))

    assert response.status_code == 200
    assert response.data == {
        "slug": "forbidden",
        "name": "Never preempt",
        "kind": "forbidden",
        "requires_verified_checkpoint": False,
        "max_checkpoint_interval_minutes": None,
        "min_runtime_minutes": None,
        "max_preemptions_per_day": None,
        "recovery_owner": "lead",
        "business_impact": "Online serving: preemption is an outage.",
    }


def test_filter_by_kind(world, client):
    response = client.get(LIST, {"kind": "forbidden"})

    assert [row["slug"] for row in response.data["results"]] == ["forbidden"]


def test_unknown_kind_is_400(world, client):
    response = client.get(LIST, {"kind": "sometimes"})

    assert response.status_code == 400
    assert list(response.data["fields"]) == ["kind"]
