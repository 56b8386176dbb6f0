"""Rules through the API as proposed rule changes: POST creates, PATCH edits, DELETE deletes
(projects, flavors, pools, tiers, preemption classes, quotas) and a project's members; each
answers 201 with the proposed change, which someone else approves and ops apply."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from governance import services
from governance.models import GpuFlavor, Membership, Pool, PriorityTier, Project, Quota, RuleChange

CREATE = {
    "api_project_list": (
        Project,
        {"slug": "robotics", "name": "Robotics", "tier": "regular"},
        {"slug": "robotics"},
    ),
    "api_flavor_list": (
        GpuFlavor,
        {"slug": "l40s", "name": "L40S", "gpu_model": "NVIDIA L40S", "memory_gb": 48},
        {"slug": "l40s"},
    ),
    "api_pool_list": (Pool, {"slug": "lab", "name": "Lab", "parent": "training"}, {"slug": "lab"}),
    "api_tier_list": (
        PriorityTier,
        {
            "slug": "urgent",
            "name": "Urgent",
            "score": 97,
            "scheduler_value": 9700,
            "owner": "ops",
            "eligibility": "Incidents",
            "confirmed_by": "On-call lead",
            "review_cycle_days": 90,
        },
        {"slug": "urgent"},
    ),
    "api_preemption_class_list": (
        None,
        {
            "slug": "checkpointed",
            "name": "Checkpointed",
            "kind": "cautious",
            "business_impact": "Loses up to 30 minutes.",
        },
        {"slug": "checkpointed"},
    ),
    "api_quota_list": (
        Quota,
        {
            "project": "speech",
            "pool": "inference",
            "flavor": "h100-80g",
            "guarantee": 0,
            "preemption_class": "allowed",
        },
        {"project__slug": "speech", "pool__slug": "inference"},
    ),
}


def _approve_and_apply(change_id: int, approver, applier) -> dict:
    client = APIClient()
    client.force_authenticate(approver)
    assert client.post(reverse("api_change_approve", args=[change_id]), {}).status_code == 200
    client.force_authenticate(applier)
    applied = client.post(reverse("api_change_apply", args=[change_id]))
    assert applied.status_code == 200, applied.json()
    return applied.json()


@pytest.mark.parametrize("url_name", list(CREATE))
def test_post_proposes_a_creation_applied_after_approval(world, api_client, ops2, url_name):
    model, body, lookup = CREATE[url_name]
    api_client.force_authenticate(world.ops)

    response = api_client.post(reverse(url_name), {"reason": "New work", **body}, format="json")

    assert response.status_code == 201, response.json()
    change = response.json()
    assert change["status"] == "proposed"
    assert [(e["field"], e["old"]) for e in change["edits"]] == [("exists", None)]
    if model is None:
        from governance.models import PreemptionClass as model
    assert not model.objects.filter(**lookup).exists()
    _approve_and_apply(change["id"], ops2, world.ops)
    created = model.objects.get(**lookup)
    assert created.history.latest().history_change_reason == "New work"
    assert RuleChange.objects.get(pk=change["id"]).edits.get().object_id == created.pk


def test_patch_proposes_the_fields_given(world, api_client, ops2):
    api_client.force_authenticate(world.ops)
    url = reverse("api_quota_detail", args=[world.vision_a100.pk])

    response = api_client.patch(
        url, {"reason": "More A100", "guarantee": 28, "ticket": "OPS-1"}, format="json"
    )

    assert response.status_code == 201, response.json()
    assert [(e["field"], e["old"], e["new"]) for e in response.json()["edits"]] == [
        ("guarantee", 24, 28)
    ]
    _approve_and_apply(response.json()["id"], ops2, world.ops)
    world.vision_a100.refresh_from_db()
    assert world.vision_a100.guarantee == 28

    tier = api_client.patch(
        reverse("api_project_detail", args=["speech"]),
        {"reason": "Launch", "tier": "key"},
        format="json",
    )
    assert tier.status_code == 201 and tier.json()["edits"][0]["new_display"] == "Key project"


def test_delete_proposes_a_deletion_refused_while_used(world, api_client, ops2):
    api_client.force_authenticate(world.ops)
    used = api_client.delete(
        reverse("api_project_detail", args=["vision"]), {"reason": "Gone"}, format="json"
    )
    assert used.status_code == 400
    assert "still used" in used.json()["detail"]
    assert "exists" in used.json()["fields"]

    services.pool_create(user=world.ops, reason="Lab", slug="lab", name="Lab")
    unused = api_client.delete(
        reverse("api_pool_detail", args=["lab"]), {"reason": "Gone"}, format="json"
    )
    assert unused.status_code == 201, unused.json()
    assert unused.json()["edits"][0]["new"] is None
    _approve_and_apply(unused.json()["id"], ops2, world.ops)
    assert not Pool.objects.filter(slug="lab").exists()


def test_a_creation_rolls_back_to_a_deletion(world, api_client, ops2):
    api_client.force_authenticate(world.ops)
    created = api_client.post(
        reverse("api_pool_list"), {"reason": "Lab", "slug": "lab", "name": "Lab"}, format="json"
    )
    _approve_and_apply(created.json()["id"], ops2, world.ops)
    rollback = api_client.post(
        reverse("api_change_rollback", args=[created.json()["id"]]),
        {"reason": "Not needed"},
        format="json",
    )
    assert rollback.status_code == 201, rollback.json()
    _approve_and_apply(rollback.json()["id"], ops2, world.ops)
    assert not Pool.objects.filter(slug="lab").exists()


def test_members_are_proposed_added_and_removed(world, api_client, ops2, outsider):
    api_client.force_authenticate(world.ops)
    url = reverse("api_project_member_list", args=["vision"])
    before = api_client.get(url).json()
    assert before["count"] == 2

    added = api_client.post(
        url, {"reason": "Joins", "username": "outsider", "role": "member"}, format="json"
    )
    assert added.status_code == 201, added.json()
    assert added.json()["edits"][0]["field"] == "membership"
    _approve_and_apply(added.json()["id"], ops2, world.ops)
    assert Membership.objects.filter(project=world.vision, user=outsider).exists()

    removed = api_client.delete(
        reverse("api_project_member_detail", args=["vision", "outsider"]),
        {"reason": "Left"},
        format="json",
    )
    assert removed.status_code == 201, removed.json()
    _approve_and_apply(removed.json()["id"], ops2, world.ops)
    assert not Membership.objects.filter(project=world.vision, user=outsider).exists()
    missing = api_client.delete(
        reverse("api_project_member_detail", args=["vision", "outsider"]),
        {"reason": "Left"},
        format="json",
    )
    assert missing.status_code == 404


@pytest.mark.parametrize(
    ("method", "url", "body", "fields"),
    [
        ("post", ("api_project_list", []), {"slug": "x"}, {"reason", "name"}),
        ("post", ("api_project_list", []), {"reason": "r", "slug": "v v", "name": "X"}, {"slug"}),
        (
            "post",
            ("api_project_list", []),
            {"reason": "r", "slug": "x", "name": "X", "tier": "gold"},
            {"tier"},
        ),
        (
            "post",
            ("api_quota_list", []),
            {
                "reason": "r",
                "project": "vision",
                "pool": "training",
                "flavor": "a100-80g",
                "guarantee": -1,
                "preemption_class": "allowed",
            },
            {"guarantee"},
        ),
        ("patch", ("api_quota_detail", ["Q"]), {"reason": "r", "guarantee": "many"}, {"guarantee"}),
        (
            "post",
            ("api_quota_list", []),
            {
                "reason": "r",
                "project": "speech",
                "pool": "inference",
                "flavor": "h100-80g",
                "guarantee": 0,
                "preemption_class": "allowed",
                "review_cycle_days": 9223372036854775806,
            },
            {"review_cycle_days"},
        ),
        ("patch", ("api_quota_detail", ["Q"]), {"reason": "r"}, {"non_field_errors"}),
        ("patch", ("api_tier_detail", ["key"]), {"reason": "r", "owner": "nobody"}, {"owner"}),
        ("patch", ("api_pool_detail", ["training"]), {"guarantee": 3}, {"reason"}),
        (
            "post",
            ("api_project_member_list", ["vision"]),
            {"reason": "r", "username": "nobody", "role": "boss"},
            {"username", "role"},
        ),
        ("delete", ("api_flavor_detail", ["a100-80g"]), {}, {"reason"}),
    ],
)
def test_bad_input_is_a_400_naming_the_fields(world, api_client, method, url, body, fields):
    api_client.force_authenticate(world.ops)
    name, args = url
    args = [str(world.vision_a100.pk) if arg == "Q" else arg for arg in args]
    response = getattr(api_client, method)(reverse(name, args=args), body, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["error"] == "invalid"
    assert fields <= set(response.json()["fields"]), response.json()
    assert not RuleChange.objects.exists()


def test_only_ops_propose_and_missing_objects_are_404(world, api_client, member):
    api_client.force_authenticate(member)
    create = api_client.post(
        reverse("api_pool_list"), {"reason": "r", "slug": "lab", "name": "Lab"}, format="json"
    )
    assert create.status_code == 403 and create.json()["error"] == "permission_denied"
    edit = api_client.patch(
        reverse("api_pool_detail", args=["training"]), {"reason": "r", "name": "T"}, format="json"
    )
    assert edit.status_code == 403
    api_client.force_authenticate(world.ops)
    missing = api_client.patch(
        reverse("api_pool_detail", args=["nope"]), {"reason": "r", "name": "T"}, format="json"
    )
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    assert not RuleChange.objects.exists()
