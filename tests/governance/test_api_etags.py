"""ETags on rule reads: a list or a detail answers 304 to If-None-Match while it is unchanged,
and a new tag once the rule (or the page asked for) changes."""

import pytest
from django.urls import reverse

from governance import services
from tests.conftest import REASON

READS = [
    ("api_project_list", []),
    ("api_project_detail", ["vision"]),
    ("api_project_member_list", ["vision"]),
    ("api_project_effective_rules", ["vision"]),
    ("api_flavor_list", []),
    ("api_flavor_detail", ["a100-80g"]),
    ("api_pool_list", []),
    ("api_pool_detail", ["training"]),
    ("api_tier_list", []),
    ("api_tier_detail", ["key"]),
    ("api_preemption_class_list", []),
    ("api_preemption_class_detail", ["allowed"]),
    ("api_quota_list", []),
    ("api_change_list", []),
    ("api_grant_list", []),
    ("api_project_history", ["vision"]),
    ("api_review_list", []),
]


@pytest.mark.parametrize(("name", "args"), READS)
def test_if_none_match_gives_304_while_unchanged(world, api_client, name, args):
    api_client.force_authenticate(world.ops)
    url = reverse(name, args=args)
    if name == "api_project_effective_rules":
        url += "?at=2026-01-01T00:00:00Z"  # without it, "now" is in the body: always new
    first = api_client.get(url)
    etag = first["ETag"]
    assert first.status_code == 200 and etag.startswith('"')

    again = api_client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304
    assert again["ETag"] == etag and again.content == b""
    assert api_client.get(url, HTTP_IF_NONE_MATCH='"other", ' + etag).status_code == 304
    assert api_client.get(url, HTTP_IF_NONE_MATCH='"other"').status_code == 200


def test_a_change_or_another_page_gives_a_new_tag(world, api_client):
    api_client.force_authenticate(world.ops)
    url = reverse("api_quota_detail", args=[world.vision_a100.pk])
    etag = api_client.get(url)["ETag"]
    services.quota_update(
        quota=world.vision_a100, user=world.ops, reason=REASON, data={"guarantee": 20}
    )
    changed = api_client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200 and changed["ETag"] != etag

    listing = reverse("api_quota_list")
    assert api_client.get(listing)["ETag"] != api_client.get(listing, {"limit": 1})["ETag"]


def test_writes_and_errors_carry_no_etag(world, api_client):
    api_client.force_authenticate(world.ops)
    assert "ETag" not in api_client.get(reverse("api_pool_detail", args=["nope"]))
    assert "ETag" not in api_client.get(reverse("api_quota_list"), {"limit": "x"})
