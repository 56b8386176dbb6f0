"""Rule review cycles moved from ``/api/v1/reviews/`` (which read as the monthly review) to
``/api/v1/review-cycles/``; the old paths answer the same until their sunset, with the
``Deprecation``, ``Sunset`` and ``Link`` headers, and the schema marks them deprecated."""

import pytest
from django.core.management import call_command
from django.urls import reverse

from governance.models import Review
from governance.toolkit.deprecation import deprecated_path

pytestmark = pytest.mark.django_db


def test_the_new_paths_are_review_cycles():
    assert reverse("api_review_list") == "/api/v1/review-cycles/"
    assert reverse("api_review_tier", args=["key"]) == "/api/v1/review-cycles/tiers/key/"
    assert reverse("api_review_quota", args=[3]) == "/api/v1/review-cycles/quotas/3/"


def test_the_old_list_answers_the_same_with_the_deprecation_headers(world, api_client, member):
    api_client.force_authenticate(member)
    new = api_client.get("/api/v1/review-cycles/", {"kind": "tier", "window_days": 366})
    old = api_client.get("/api/v1/reviews/", {"kind": "tier", "window_days": 366})
    assert old.status_code == new.status_code == 200
    assert old.json() == new.json() and old.json()["count"] > 0
    assert "Deprecation" not in new and "Sunset" not in new
    assert old["Deprecation"] == "@1796256000"  # RFC 9745: 3 December 2026, 00:00 UTC
    assert old["Sunset"] == "Wed, 30 Jun 2027 00:00:00 GMT"
    assert old["Link"] == '<http://testserver/api/v1/review-cycles/>; rel="successor-version"'
    # Bad input is still a 400 with its field, on the old path too.
    bad = api_client.get("/api/v1/reviews/", {"kind": "x"})
    assert bad.status_code == 400 and "kind" in str(bad.json())
    assert bad["Deprecation"]


def test_the_old_paths_still_record_a_review(world, api_client):
    api_client.force_authenticate(world.ops)
    response = api_client.post(
        f"/api/v1/reviews/quotas/{world.vision_a100.pk}/",
        {"outcome": "keep", "notes": "Waits fine", "review_cycle_days": 30},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert Review.objects.filter(quota=world.vision_a100).count() == 1
    assert response["Link"] == (
        f"<http://testserver/api/v1/review-cycles/quotas/{world.vision_a100.pk}/>; "
        'rel="successor-version"'
    )
    missing = api_client.post("/api/v1/reviews/tiers/nothing/", {}, format="json")
    assert missing.status_code == 404 and missing["Deprecation"]


def test_the_schema_marks_the_old_paths_deprecated(tmp_path):
    import yaml

    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    paths = yaml.safe_load(target.read_text())["paths"]
    assert paths["/api/v1/reviews/"]["get"]["deprecated"] is True
    assert paths["/api/v1/reviews/tiers/{slug}/"]["post"]["deprecated"] is True
    assert paths["/api/v1/reviews/quotas/{id}/"]["post"]["deprecated"] is True
    assert paths["/api/v1/reviews/{id}/status/"]["get"]["deprecated"] is True
    for new in ("/api/v1/review-cycles/", "/api/v1/monthly-reviews/{id}/status/"):
        (operation,) = paths[new].values()
        assert "deprecated" not in operation, new
    assert (
        paths["/api/v1/reviews/"]["get"]["summary"]
        == paths["/api/v1/review-cycles/"]["get"]["summary"]
    )


def test_a_deprecated_path_does_not_change_the_view_it_wraps():
    from governance.apis import ReviewDueListApi

    wrapped = deprecated_path(
        ReviewDueListApi, successor="api_review_list", operation_ids={"get": "x_deprecated"}
    )
    assert issubclass(wrapped, ReviewDueListApi) and wrapped is not ReviewDueListApi
    assert "finalize_response" not in ReviewDueListApi.__dict__
