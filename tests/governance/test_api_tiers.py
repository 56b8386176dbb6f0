"""GET /api/v1/tiers/ and /api/v1/tiers/<slug>/."""

from datetime import timedelta

import pytest
from django.urls import reverse

LIST = reverse("api_tier_list")


@pytest.fixture
def client(api_client, member):
    api_client.force_login(member)
    return api_client


def slugs(response) -> list[str]:
    assert response.status_code == 200, response.data
    return [row["slug"] for row in response.data["results"]]


def test_list_is_ordered_highest_first(world, client):
    response = client.get(LIST)

    assert response.data["count"] == 4
    assert slugs(response) == ["production", "key", "regular", "exploratory"]


def test_detail_shows_every_rule(world, client, today):
    response = client.get(reverse("api_tier_detail", args=["production"]))

    assert response.status_code == 200
    assert response.data == {
        "slug": "production",
        "name": "Production service",
        "score": 95,
        "scheduler_value": 950,
        "description": "",
        "owner": "ops",
        "eligibility": "Any project",
        "confirmed_by": "Ops",
        "max_gpus_per_job": None,
        "max_gpus_total": None,
        "may_preempt": True,
        "preemptible_tiers": ["regular", "exploratory"],
        "aging_after_minutes": None,
        "aging_step": None,
        "aging_cap": None,
        "after_grant": "keep",
        "review_cycle_days": 90,
        "wait_alert_minutes": 10,
        "last_reviewed_on": None,
        "next_review_on": (today + timedelta(days=90)).isoformat(),
        "is_default": False,
    }


def test_list_shows_aging_and_default(world, client):
    rows = {row["slug"]: row for row in client.get(LIST).data["results"]}

    assert rows["exploratory"]["aging_after_minutes"] == 240
    assert rows["exploratory"]["aging_step"] == 10
    assert rows["exploratory"]["aging_cap"] == "regular"
    assert rows["exploratory"]["preemptible_tiers"] == []
    assert rows["production"]["preemptible_tiers"] == ["regular", "exploratory"]
    assert [slug for slug, row in rows.items() if row["is_default"]] == ["regular"]


def test_filter_may_preempt(world, client):
    assert slugs(client.get(LIST, {"may_preempt": "true"})) == ["production"]
    assert slugs(client.get(LIST, {"may_preempt": "false"})) == ["key", "regular", "exploratory"]


def test_filter_is_default(world, client):
    assert slugs(client.get(LIST, {"is_default": "true"})) == ["regular"]
    assert slugs(client.get(LIST, {"is_default": "false"})) == ["production", "key", "exploratory"]


def test_filter_due_before_is_exclusive(world, client, today):
    due = today + timedelta(days=90)  # every tier of the world is due then
    assert slugs(client.get(LIST, {"due_before": due.isoformat()})) == []
    after = (due + timedelta(days=1)).isoformat()
    assert slugs(client.get(LIST, {"due_before": after})) == [
        "production",
        "key",
        "regular",
        "exploratory",
    ]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"due_before": "notadate"}, "due_before"),
        ({"due_before": "2025-02-30"}, "due_before"),
        ({"may_preempt": "maybe"}, "may_preempt"),
        ({"is_default": "2"}, "is_default"),
    ],
)
def test_bad_filter_is_400_naming_the_parameter(world, client, params, field):
    response = client.get(LIST, params)

    assert response.status_code == 400
    assert list(response.data["fields"]) == [field]
