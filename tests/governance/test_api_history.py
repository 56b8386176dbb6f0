"""History per rule through the API: newest first, with who, why and the rule change."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from governance import services
from tests.conftest import REASON


def test_a_quotas_history_names_the_change_and_the_fields(world, api_client, ops2, member):
    api_client.force_authenticate(world.ops)
    proposed = api_client.patch(
        reverse("api_quota_detail", args=[world.vision_a100.pk]),
        {"reason": "More A100", "guarantee": 28},
        format="json",
    ).json()
    api_client.force_authenticate(ops2)
    api_client.post(reverse("api_change_approve", args=[proposed["id"]]), {})
    api_client.post(reverse("api_change_apply", args=[proposed["id"]]))
    api_client.force_authenticate(member)

    body = api_client.get(reverse("api_quota_history", args=[world.vision_a100.pk])).json()

    assert body["count"] == 2
    latest, created = body["results"]
    assert (latest["action"], latest["user"], latest["reason"], latest["change"]) == (
        "changed",
        "ops2",
        "More A100",
        proposed["id"],
    )
    assert [(c["old"], c["new"]) for c in latest["changes"]] == [("24", "28")]
    assert created["action"] == "created" and created["change"] is None


def test_a_projects_history_has_its_members_and_a_pools_its_capacity(world, api_client):
    services.membership_set(
        project=world.speech, member=world.ops, role="lead", user=world.ops, reason=REASON
    )
    api_client.force_authenticate(world.ops)
    project = api_client.get(reverse("api_project_history", args=["speech"])).json()
    assert {row["section"] for row in project["results"]} == {"project", "members"}
    pool = api_client.get(reverse("api_pool_history", args=["training"]), {"limit": 1}).json()
    assert pool["count"] > 1 and len(pool["results"]) == 1
    assert {
        row["section"]
        for row in api_client.get(reverse("api_pool_history", args=["training"])).json()["results"]
    } == {"pool", "capacity"}


@pytest.mark.parametrize(
    "name",
    [
        "api_project_history",
        "api_flavor_history",
        "api_pool_history",
        "api_tier_history",
        "api_preemption_class_history",
    ],
)
def test_missing_is_404_and_bad_paging_is_400(world, api_client, name):
    api_client.force_authenticate(world.ops)
    assert api_client.get(reverse(name, args=["nope"])).json()["error"] == "not_found"
    obj = {"api_flavor_history": "a100-80g", "api_pool_history": "training"}.get(name)
    obj = obj or {"api_project_history": "vision", "api_tier_history": "key"}.get(name, "allowed")
    bad = api_client.get(reverse(name, args=[obj]), {"limit": "x"})
    assert bad.status_code == 400 and list(bad.json()["fields"]) == ["limit"]


def test_a_history_costs_the_same_queries_however_long_it_is(
    world, api_client, django_assert_num_queries
):
    """Each row's changes, then the names of the rows they point to: one query per related
    model, not one per history row (a quota's class, a pool's capacity per flavor)."""
    api_client.force_authenticate(world.ops)
    urls = [
        reverse("api_quota_history", args=[world.vision_a100.pk]),
        reverse("api_pool_history", args=["training"]),
    ]
    counts, rows = [], []
    for url in urls:
        api_client.get(url)  # the session's first request
        with CaptureQueriesContext(connection) as first:
            rows.append(api_client.get(url).json()["count"])
        counts.append(len(first))
    kw = {"user": world.ops, "reason": REASON}
    for klass, guarantee in ((world.cautious, 20), (world.forbidden, 18), (world.allowed, 16)):
        services.quota_update(
            quota=world.vision_a100,
            data={"preemption_class": klass, "guarantee": guarantee},
            **kw,
        )
    for gpus in (70, 72):
        services.pool_capacity_set(pool=world.training, flavor=world.a100, gpus=gpus, **kw)
        services.pool_capacity_set(pool=world.training, flavor=world.h100, gpus=gpus - 60, **kw)
    for url, count, before, added in zip(urls, counts, rows, (3, 4), strict=True):
        with django_assert_num_queries(count):
            body = api_client.get(url).json()
        assert body["count"] == before + added, url
