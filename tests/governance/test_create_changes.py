"""Every new rule is a rule change, on every path: each create page and the API propose it,
its author never approves it alone (the refusal names the rule), a second person approves
it under the same rules as an edit (a new tier by its future owner as well as ops; a new
default tier names the tier it demotes), it is applied with history and rolled back by a
change that removes it, or says what still uses it."""

import html
import inspect
from typing import Any

import pytest
from django.urls import NoReverseMatch, resolve, reverse
from rest_framework.test import APIClient

from governance import services
from governance.models import (
    ChangeStatus,
    GpuFlavor,
    Pool,
    PreemptionClass,
    PriorityTier,
    Quota,
    RuleChange,
)
from tests.conftest import login

pytestmark = pytest.mark.django_db

FOUR_EYES = "You proposed this change: someone else must approve it."


def _text(response) -> str:
    return html.unescape(response.content.decode())


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _tier_form(world, owner, **overrides: Any) -> dict[str, Any]:
    """The issue's tier: scored 99 (above production's 95), preempting all four tiers."""
    return {
        "slug": "vip",
        "name": "VIP",
        "score": 99,
        "scheduler_value": 990,
        "owner": owner.username,
        "eligibility": "Whatever ops says",
        "confirmed_by": "Ops",
        "review_cycle_days": 30,
        "may_preempt": "on",
        "preemptible_tiers": [
            world.exploratory.pk,
            world.regular.pk,
            world.key.pk,
            world.production.pk,
        ],
        "reason": "A tier of my own",
        **overrides,
    }


# Each create page with the one-person attempt: (page, model, form).
CHAINS = {
    "quota": (
        Quota,
        lambda w: {
            "project": w.speech.slug,
            "pool": w.training.pk,
            "flavor": w.h100.pk,
            "guarantee": 2,
            "fair_share_weight": 1,
            "reclaim_grace_minutes": 5,
            "preemption_class": w.allowed.pk,
            "reason": "Two GPUs for speech",
        },
    ),
    "tier": (PriorityTier, lambda w: _tier_form(w, w.ops)),
    "pool": (Pool, lambda w: {"slug": "shadow", "name": "Shadow", "reason": "A pool of mine"}),
    "flavor": (
        GpuFlavor,
        lambda w: {
            "slug": "b200",
            "name": "B200",
            "gpu_model": "NVIDIA B200",
            "memory_gb": 192,
            "gres_type": "b200",
            "node_labels": '{"gpu.example.com/model": "b200"}',
            "node_taints": "",
            "reason": "A flavor of mine",
        },
    ),
    "preemption_class": (
        PreemptionClass,
        lambda w: {
            "slug": "untouchable",
            "name": "Untouchable",
            "kind": "forbidden",
            "business_impact": "Never stops.",
            "reason": "A class of mine",
        },
    ),
}


@pytest.mark.parametrize("kind", list(CHAINS))
def test_ops_alone_cannot_create_a_rule_through_its_page(ops, world, kind):
    """The issue's chain, per create page: ops submits the form, then tries to approve the
    change on the page and through the API: nothing exists, the refusal names four eyes."""
    model, form = CHAINS[kind]
    before = model.objects.count()
    response = login(ops).post(reverse(f"{kind}_create"), form(world))
    assert response.status_code == 302, _text(response)
    change = RuleChange.objects.latest("pk")
    assert response["Location"] == change.get_absolute_url()
    assert change.status == ChangeStatus.PROPOSED
    assert model.objects.count() == before

    refused = login(ops).post(reverse("change_approve", args=[change.pk]))
    assert refused.status_code == 403 and FOUR_EYES in _text(refused)
    refused = _api(ops).post(reverse("api_change_approve", args=[change.pk]), {}, format="json")
    assert refused.status_code == 403 and FOUR_EYES in refused.json()["detail"]
    change.refresh_from_db()
    assert change.status == ChangeStatus.PROPOSED
    assert model.objects.count() == before


@pytest.mark.parametrize("kind", list(CHAINS))
def test_the_create_page_shows_the_plan_before_anything_exists(ops, world, kind):
    """Like an edit page: the change's page lists what the creation sets, old → new."""
    _model, form = CHAINS[kind]
    response = login(ops).post(reverse(f"{kind}_create"), form(world))
    plan = _text(login(ops).get(response["Location"]))
    assert "(to be created)" in plan
    assert form(world)["reason"] in plan


API_BODIES = {
    "quota": lambda w: {
        "project": "speech",
        "pool": "training",
        "flavor": "h100-80g",
        "guarantee": 2,
        "preemption_class": "allowed",
    },
    "pool": lambda w: {"slug": "shadow", "name": "Shadow"},
    "preemption_class": lambda w: {
        "slug": "untouchable",
        "name": "Untouchable",
        "kind": "forbidden",
        "business_impact": "Never stops.",
    },
}
API_LISTS = {
    "quota": "api_quota_list",
    "pool": "api_pool_list",
    "preemption_class": "api_preemption_class_list",
}


@pytest.mark.parametrize("kind", list(API_BODIES))
def test_an_api_creation_is_a_proposal_its_author_cannot_approve(ops, ops2, world, kind):
    model = CHAINS[kind][0]
    before = model.objects.count()
    response = _api(ops).post(
        reverse(API_LISTS[kind]),
        {**API_BODIES[kind](world), "reason": "Made through the API"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    change = RuleChange.objects.get(pk=response.json()["id"])
    assert model.objects.count() == before
    refused = _api(ops).post(reverse("api_change_approve", args=[change.pk]), {}, format="json")
    assert refused.status_code == 403 and FOUR_EYES in refused.json()["detail"]
    services.rule_change_apply(
        change=services.rule_change_approve(change=change, user=ops2), user=ops2
    )
    assert model.objects.count() == before + 1


def test_a_new_tier_needs_its_future_owner_as_well_as_ops(ops, ops2, approver, world):
    """Ops proposes a tier that ``approver`` will own: a second ops person is refused (the
    message names the owner), the future owner approves."""
    response = login(ops).post(reverse("tier_create"), _tier_form(world, approver))
    change = RuleChange.objects.get(pk=int(response["Location"].rstrip("/").split("/")[-1]))
    refused = login(ops2).post(reverse("change_approve", args=[change.pk]))
    assert refused.status_code == 403
    assert "needs its business owner, Approver" in _text(refused)
    assert "VIP" in _text(refused)
    assert login(approver).post(reverse("change_approve", args=[change.pk])).status_code == 302
    services.rule_change_apply(change=change, user=ops2)
    assert PriorityTier.objects.get(slug="vip").owner == approver


def test_a_tier_ops_will_own_needs_another_ops_person(ops, ops2, world):
    response = login(ops).post(reverse("tier_create"), _tier_form(world, ops))
    change = RuleChange.objects.latest("pk")
    assert response.status_code == 302
    assert login(ops2).post(reverse("change_approve", args=[change.pk])).status_code == 302


def test_a_new_default_tier_names_the_tier_it_demotes(ops, ops2, world):
    """The issue's silent default: the plan names "Regular" and needs a confirmation."""
    form = _tier_form(world, ops, is_default="on", may_preempt="", preemptible_tiers=[])
    refused = login(ops).post(reverse("tier_create"), form)
    assert refused.status_code == 200
    assert "The change makes “VIP” the default tier: “Regular” stops being the default" in _text(
        refused
    )
    assert not RuleChange.objects.exists()
    response = login(ops).post(
        reverse("tier_create"), {**form, "change-confirmation_reason": "Agreed"}
    )
    change = RuleChange.objects.get()
    assert response.status_code == 302
    assert "“Regular” stops being the default" in _text(login(ops).get(response["Location"]))
    services.rule_change_apply(
        change=services.rule_change_approve(change=change, user=ops2), user=ops2
    )
    assert PriorityTier.objects.get(is_default=True).slug == "vip"
    # Rolling it back deletes nothing while it is the default: the refusal says why.
    with pytest.raises(Exception, match="default tier"):
        services.rule_change_rollback(
            change=change, user=ops2, reason="Undo", confirmation_reason="x"
        )
    assert PriorityTier.objects.filter(slug="vip").exists()


def test_rolling_back_a_creation_removes_it_or_says_what_uses_it(ops, ops2, world):
    created = services.rule_object_propose_create(
        user=ops,
        reason="New flavor",
        model=GpuFlavor,
        data={"slug": "b200", "name": "B200", "gpu_model": "NVIDIA B200", "memory_gb": 192},
    )
    services.rule_change_apply(
        change=services.rule_change_approve(change=created, user=ops2), user=ops2
    )
    flavor = GpuFlavor.objects.get(slug="b200")
    capacity = services.rule_change_create(
        user=ops,
        reason="B200 nodes",
        edits=[services.EditSpec(target=world.training, field="capacity", key=flavor, value=8)],
    )
    services.rule_change_apply(
        change=services.rule_change_approve(change=capacity, user=ops2), user=ops2
    )
    with pytest.raises(Exception, match="still used") as refused:
        services.rule_change_rollback(change=created, user=ops2, reason="Cancelled")
    assert "pool capacity" in str(refused.value)
    assert GpuFlavor.objects.filter(slug="b200").exists()

    # A creation nothing uses: its rollback removes it, with a history row.
    pool = services.rule_object_propose_create(
        user=ops, reason="New pool", model=Pool, data={"slug": "shadow", "name": "Shadow"}
    )
    services.rule_change_apply(
        change=services.rule_change_approve(change=pool, user=ops2), user=ops2
    )
    assert Pool.objects.filter(slug="shadow").exists()
    rollback = services.rule_change_rollback(change=pool, user=ops2, reason="Cancelled")
    services.rule_change_apply(
        change=services.rule_change_approve(change=rollback, user=ops), user=ops
    )
    assert not Pool.objects.filter(slug="shadow").exists()
    gone = Pool.history.filter(slug="shadow").latest("history_date")
    assert (gone.history_type, gone.history_user, gone.history_change_reason) == (
        "-",
        ops,
        "Cancelled",
    )


def test_every_creatable_kind_has_a_create_page_that_proposes():
    """A kind added later cannot skip it: every registered kind that may be created and has
    a ``<pages>_create`` page proposes from it (the page's view calls a proposing helper)."""
    from governance.selectors.changes.kinds import REGISTRY

    pages = 0
    for kind in REGISTRY.values():
        if kind.create is None:
            continue
        try:
            url = reverse(f"{kind.pages}_create")
        except NoReverseMatch:
            continue  # created only through the API (a cluster's)
        source = inspect.getsource(inspect.unwrap(resolve(url).func))
        assert "propose" in source, (kind.object_type, url)
        pages += 1
    assert pages >= 6
