"""Review cycles through the API: what is due (tiers and quotas), and recording a review."""

from datetime import timedelta

from django.urls import reverse

from governance import services
from governance.models import ChangeStatus, Quota, Review


def test_due_reviews_list_tiers_and_quotas_earliest_first(world, api_client, member, today):
    services.review_record(
        user=world.ops,
        quota=world.vision_a100,
        outcome="keep",
        notes="Initial review",
        today=today - timedelta(days=170),
    )
    api_client.force_authenticate(member)
    url = reverse("api_review_list")

    body = api_client.get(url, {"kind": "quota"}).json()
    assert [(row["kind"], row["object"]) for row in body["results"]] == [
        ("quota", str(world.vision_a100.pk))
    ]
    later = api_client.get(url, {"on": str(today + timedelta(days=400))}).json()
    assert later["count"] > 1
    assert all(row["overdue"] for row in later["results"])
    days = [row["next_review_on"] for row in later["results"]]
    assert days == sorted(days)
    assert api_client.get(url, {"kind": "quota", "window_days": 0}).json()["count"] == 0


def test_recording_a_review_moves_the_next_one(world, api_client, today):
    api_client.force_authenticate(world.ops)
    url = reverse("api_review_quota", args=[world.vision_a100.pk])

    response = api_client.post(
        url, {"outcome": "keep", "notes": "Waits fine", "review_cycle_days": 30}, format="json"
    )

    assert response.status_code == 201, response.json()
    assert response.json()["next_review_on"] == str(today + timedelta(days=30))
    review = Review.objects.get()
    assert review.reviewed_by == world.ops
    # The new cycle is a proposed change; it holds once a second person applies it.
    assert Quota.objects.get(pk=world.vision_a100.pk).review_cycle_days == 180
    assert review.change is not None and review.change.proposed_by == world.ops


def test_retiring_a_tier_at_its_review_proposes_a_change(world, api_client, ops2):
    move = services.rule_change_create(
        user=world.ops,
        reason="Vision back to regular",
        edits=[services.EditSpec(target=world.vision, field="tier", value=world.regular)],
    )
    services.rule_change_approve(change=move, user=ops2)
    services.rule_change_apply(change=move, user=world.ops)
    api_client.force_authenticate(world.ops)
    response = api_client.post(
        reverse("api_review_tier", args=["key"]),
        {"outcome": "retire", "notes": "Nobody uses it"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert response.json()["change"] is not None
    assert Review.objects.get().change.status == ChangeStatus.PROPOSED
    used = api_client.post(
        reverse("api_review_tier", args=["exploratory"]),
        {"outcome": "retire", "notes": "Nobody uses it"},
        format="json",
    )
    assert used.status_code == 400 and "cannot retire" in used.json()["detail"]


def test_bad_input_403_and_404(world, api_client, member):
    api_client.force_authenticate(world.ops)
    quota_url = reverse("api_review_quota", args=[world.vision_a100.pk])
    bad = api_client.post(quota_url, {"outcome": "burn", "review_cycle_days": 0}, format="json")
    assert bad.status_code == 400
    assert set(bad.json()["fields"]) == {"outcome", "notes", "review_cycle_days"}
    retire = api_client.post(quota_url, {"outcome": "retire", "notes": "x"}, format="json")
    assert retire.status_code == 400 and "outcome" in retire.json()["fields"]
    filters = api_client.get(reverse("api_review_list"), {"kind": "x", "on": "soon"})
    assert filters.status_code == 400 and set(filters.json()["fields"]) == {"kind", "on"}
    assert api_client.post(reverse("api_review_quota", args=[999]), {}).status_code == 404
    api_client.force_authenticate(member)
    forbidden = api_client.post(quota_url, {"outcome": "keep", "notes": "x"}, format="json")
    assert forbidden.status_code == 403 and forbidden.json()["error"] == "permission_denied"
    assert not Review.objects.exists()
