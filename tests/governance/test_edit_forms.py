"""Ops change the rules through the pages: an edit form proposes a rule change (which needs a
reason and is checked by the services when proposed); once another operator approves and
applies it, it shows up in the History tab as field, old → new, who and why."""

import html
import re

import pytest
from django.urls import reverse

from governance import services
from governance.models import (
    ChangeStatus,
    GpuFlavor,
    Membership,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PriorityTier,
    Project,
    ProjectRole,
    Quota,
    RuleChange,
)
from tests.conftest import REASON, login


def _quota_form(quota: Quota, **changes) -> dict:
    data = {
        "guarantee": quota.guarantee,
        "borrow_limit": "" if quota.borrow_limit is None else quota.borrow_limit,
        "lending_limit": "" if quota.lending_limit is None else quota.lending_limit,
        "fair_share_weight": quota.fair_share_weight,
        "reclaim_grace_minutes": quota.reclaim_grace_minutes,
        "preemption_class": quota.preemption_class_id,
        "reason": "",
    }
    data.update(changes)
    return data


def _text(response) -> str:
    return html.unescape(response.content.decode())


@pytest.fixture
def ops2_client(ops2):
    return login(ops2)


def _proposed(response) -> RuleChange:
    """The change a submitted edit form proposed (the page redirects to it)."""
    assert response.status_code == 302, _text(response)
    change = RuleChange.objects.latest("pk")
    assert response["Location"] == reverse("change_detail", args=[change.pk])
    assert change.status == ChangeStatus.PROPOSED
    return change


def _approve_and_apply(client, response) -> RuleChange:
    """Another operator approves and applies the change that ``response`` proposed."""
    change = _proposed(response)
    assert client.post(reverse("change_approve", args=[change.pk])).status_code == 302
    assert client.post(reverse("change_apply", args=[change.pk])).status_code == 302
    change.refresh_from_db()
    assert change.status == ChangeStatus.APPLIED, change.status
    return change


def test_ops_proposes_a_quota_edit_that_applies_after_approval(
    ops_client, ops2_client, ops, ops2, world
):
    quota = world.vision_a100
    response = ops_client.post(
        reverse("quota_edit", args=[quota.pk]),
        _quota_form(quota, guarantee=20, reason="Vision moves work to H100"),
    )
    change = _proposed(response)
    quota.refresh_from_db()
    assert quota.guarantee == 24  # proposed, not applied

    plan = _text(ops_client.get(response["Location"]))
    assert f"Proposed change #{change.pk}." in plan
    row = plan.split("<tbody>")[1].split("</tr>")[0]
    assert "Guarantee (GPUs)" in row
    assert '<td class="changes__old">24</td>' in row
    assert '<td class="changes__new">20</td>' in row
    assert "Borrow limit" not in plan.split("<tbody>")[1].split("</tbody>")[0]
    assert ">Vision</a>" in plan.split("Affected projects")[1]
    assert ">Training</a>" in plan.split("Affected pools")[1]
    assert "You proposed this change: someone else must approve it." in plan

    change = _approve_and_apply(ops2_client, response)
    assert (change.approved_by, change.applied_by) == (ops2, ops2)
    quota.refresh_from_db()
    assert quota.guarantee == 20
    latest = quota.history.latest()
    assert (latest.history_user, latest.history_change_reason, latest.rule_change) == (
        ops2,
        "Vision moves work to H100",
        change,
    )

    history = _text(ops_client.get(reverse("quota_history", args=[quota.pk])))
    entry = history.split("Vision moves work to H100")[1].split("</table>")[0]
    assert "Guarantee (GPUs)" in entry
    assert '<td class="changes__old">24</td>' in entry
    assert '<td class="changes__new">20</td>' in entry
    assert "Borrow limit" not in entry  # unchanged fields are not listed
    head = history.split("Vision moves work to H100")[0].rsplit("<li", 1)[1]
    assert str(ops2) in head
    assert reverse("change_detail", args=[change.pk]) in head


def test_a_change_without_a_reason_is_refused(ops_client, world):
    quota = world.vision_a100
    before = quota.history.count()
    response = ops_client.post(
        reverse("quota_edit", args=[quota.pk]), _quota_form(quota, guarantee=20, reason="  ")
    )
    assert response.status_code == 200
    assert "This field is required." in _text(response)
    assert 'value="20"' in _text(response)  # the input is kept
    quota.refresh_from_db()
    assert quota.guarantee == 24
    assert quota.history.count() == before
    assert not RuleChange.objects.exists()


def test_an_overcommitted_pool_is_refused_with_the_numbers(ops_client, world):
    quota = world.vision_a100
    before = quota.history.count()
    response = ops_client.post(
        reverse("quota_edit", args=[quota.pk]),
        _quota_form(quota, guarantee=60, lending_limit=12, reason="Grow vision"),
    )
    assert response.status_code == 200
    text = _text(response)
    assert "The change was not saved." in text
    assert (
        "Pool “Training” has 64 A100 80G GPUs, but the guarantees in it would add up to 76."
    ) in text
    quota.refresh_from_db()
    assert quota.guarantee == 24
    assert quota.history.count() == before
    assert not RuleChange.objects.exists()  # refused when proposed, not at approval


def test_a_lending_limit_above_the_guarantee_is_refused(ops_client, world):
    quota = world.vision_a100
    response = ops_client.post(
        reverse("quota_edit", args=[quota.pk]),
        _quota_form(quota, lending_limit=30, reason="Lend more"),
    )
    assert response.status_code == 200
    assert "The lending limit (30 GPUs) cannot exceed the guarantee (24 GPUs)" in _text(response)
    quota.refresh_from_db()
    assert quota.lending_limit == 12


def test_saving_without_a_change_writes_no_history(ops_client, world):
    quota = world.vision_a100
    before = quota.history.count()
    response = ops_client.post(
        reverse("quota_edit", args=[quota.pk]), _quota_form(quota, reason="Just looking")
    )
    assert response.status_code == 302
    assert quota.history.count() == before
    assert not RuleChange.objects.exists()


def test_quota_history_queries_do_not_grow_with_rows(
    ops_client, ops, world, django_assert_num_queries
):
    quota = world.vision_a100
    url = reverse("quota_history", args=[quota.pk])
    # session, user, the quota, its history rows, then one query per related model shown
    # (project, pool, flavor, preemption class).
    queries = 8
    with django_assert_num_queries(queries):
        assert ops_client.get(url).status_code == 200
    for guarantee, preemption_class in [(20, world.allowed), (18, world.forbidden)] * 5:
        services.quota_update(
            quota=quota,
            user=ops,
            reason=f"Set {guarantee}",
            data={
                "guarantee": guarantee,
                "lending_limit": 10,
                "preemption_class": preemption_class,
            },
        )
    with django_assert_num_queries(queries):
        response = ops_client.get(url)
    text = _text(response)
    assert text.count('class="timeline__entry') == 11
    assert '<td class="changes__old">Preemptible</td>' in text
    assert '<td class="changes__new">Never preempt</td>' in text


def test_tier_history_names_the_tiers_it_may_preempt(
    ops_client, ops2_client, ops, world, django_assert_num_queries
):
    tier = world.production
    response = ops_client.post(
        reverse("tier_edit", args=[tier.slug]),
        {
            "name": tier.name,
            "score": tier.score,
            "scheduler_value": tier.scheduler_value,
            "owner": ops.username,
            "eligibility": tier.eligibility,
            "confirmed_by": tier.confirmed_by,
            "may_preempt": "on",
            "preemptible_tiers": [world.key.pk, world.regular.pk, world.exploratory.pk],
            "review_cycle_days": 30,
            "reason": "Production may also preempt key projects",
            "change-confirmation_reason": "Preemption and review cycle agreed together",
        },
    )
    _approve_and_apply(ops2_client, response)
    assert set(tier.preemptible_tiers.all()) == {world.key, world.regular, world.exploratory}
    url = reverse("tier_history", args=[tier.slug])
    # session, user, the tier and its preemptible tiers, the history rows, their preemptible
    # tiers, then the names of the owners and of the tiers.
    with django_assert_num_queries(8):
        text = _text(ops_client.get(url))
    change = text.split("Production may also preempt key projects")[1].split("</table>")[0]
    assert "Tiers it may preempt" in change
    assert '<td class="changes__old">Exploratory, Regular</td>' in change
    assert '<td class="changes__new">Exploratory, Key project, Regular</td>' in change
    assert "Review cycle (days)" in change


def test_tier_aging_that_would_let_a_job_preempt_is_refused(ops_client, ops, world):
    tier = world.exploratory
    response = ops_client.post(
        reverse("tier_edit", args=[tier.slug]),
        {
            "name": tier.name,
            "score": tier.score,
            "scheduler_value": tier.scheduler_value,
            "owner": ops.username,
            "eligibility": tier.eligibility,
            "confirmed_by": tier.confirmed_by,
            "aging_after_minutes": 240,
            "aging_step": 10,
            "aging_cap": world.production.pk,
            "review_cycle_days": 90,
            "reason": "Let exploration age further",
        },
    )
    assert response.status_code == 200
    assert "Aging must never let a job preempt." in _text(response)
    tier.refresh_from_db()
    assert tier.aging_cap == world.regular


def test_making_another_tier_the_default_moves_the_default(ops_client, ops2_client, ops, world):
    tier = world.key
    data = _form_of(tier, ops)
    demoted = PriorityTier.objects.get(is_default=True)
    response = ops_client.post(reverse("tier_edit", args=[tier.slug]), data)
    # The plan names the tier that stops being the default, and asks for a confirmation.
    assert response.status_code == 200
    assert (
        f"The change makes “{tier.name}” the default tier: “{demoted.name}” stops being the default"
    ) in _text(response)
    assert not RuleChange.objects.exists()
    response = ops_client.post(
        reverse("tier_edit", args=[tier.slug]),
        {**data, "change-confirmation_reason": "Agreed with the business"},
    )
    change = _approve_and_apply(ops2_client, response)
    assert "stops being the default" in change.display_warnings[0]
    assert PriorityTier.objects.get(is_default=True) == tier
    assert not PriorityTier.objects.get(pk=demoted.pk).is_default


def _form_of(tier: PriorityTier, ops) -> dict:
    return {
        "name": tier.name,
        "score": tier.score,
        "scheduler_value": tier.scheduler_value,
        "owner": ops.username,
        "eligibility": tier.eligibility,
        "confirmed_by": tier.confirmed_by,
        "review_cycle_days": 90,
        "is_default": "on",
        "reason": "Key is the new normal",
    }


@pytest.mark.parametrize(
    ("labels", "taints", "message"),
    [
        ('{"gpu.example.com/model": a100', "[]", "This is not valid JSON. Write an object"),
        ('{"bad key!": "a100"}', "", "is not a valid Kubernetes label"),
    ],
)
def test_bad_flavor_labels_are_a_form_error(ops_client, world, labels, taints, message):
    flavor = world.a100
    response = ops_client.post(
        reverse("flavor_edit", args=[flavor.slug]),
        {
            "name": flavor.name,
            "gpu_model": flavor.gpu_model,
            "memory_gb": flavor.memory_gb,
            "gres_type": flavor.gres_type,
            "node_labels": labels,
            "node_taints": taints,
            "reason": "Relabel",
        },
    )
    assert response.status_code == 200
    assert message in _text(response)
    flavor.refresh_from_db()
    assert flavor.node_labels == {"gpu.example.com/model": "a100"}


def test_flavor_labels_change_shows_json_in_history(ops_client, ops2_client, world):
    flavor = world.a100
    response = ops_client.post(
        reverse("flavor_edit", args=[flavor.slug]),
        {
            "name": flavor.name,
            "gpu_model": flavor.gpu_model,
            "memory_gb": flavor.memory_gb,
            "gres_type": flavor.gres_type,
            "node_labels": '{"gpu.example.com/model": "a100-80g"}',
            "node_taints": '[{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]',
            "reason": "Nodes were relabelled",
        },
    )
    _approve_and_apply(ops2_client, response)
    text = _text(ops_client.get(reverse("flavor_history", args=[flavor.slug])))
    assert '{"gpu.example.com/model": "a100-80g"}' in text
    assert "NoSchedule" in text


CREATES = {
    "project": lambda w: {"slug": "audio", "name": "Audio", "tier": w.regular.pk},
    "flavor": lambda w: {
        "slug": "l40s",
        "name": "L40S",
        "gpu_model": "NVIDIA L40S",
        "memory_gb": 48,
        "gres_type": "l40s",
        "node_labels": '{"gpu.example.com/model": "l40s"}',
        "node_taints": "",
    },
    "pool": lambda w: {"slug": "research", "name": "Research", "parent": w.training.pk},
    "tier": lambda w: {
        "slug": "urgent",
        "name": "Urgent",
        "score": 80,
        "scheduler_value": 800,
        "owner": w.ops.username,
        "eligibility": "Deadlines agreed with the business",
        "confirmed_by": "Head of research",
        "review_cycle_days": 30,
        "may_preempt": "on",
        "preemptible_tiers": [w.exploratory.pk],
    },
    "preemption_class": lambda w: {
        "slug": "checkpointed",
        "name": "Checkpointed",
        "kind": "allowed",
        "business_impact": "Restarts from its last checkpoint.",
        "requires_verified_checkpoint": "on",
        "max_checkpoint_interval_minutes": 15,
    },
    "quota": lambda w: {
        "project": w.speech.slug,
        "pool": w.training.pk,
        "flavor": w.h100.pk,
        "guarantee": 8,
        "borrow_limit": 8,
        "fair_share_weight": 1,
        "reclaim_grace_minutes": 5,
        "preemption_class": w.allowed.pk,
    },
}

MODELS = {
    "project": Project,
    "flavor": GpuFlavor,
    "pool": Pool,
    "tier": PriorityTier,
    "preemption_class": PreemptionClass,
    "quota": Quota,
}


@pytest.mark.parametrize("kind", list(CREATES))
def test_a_create_page_proposes_and_a_second_operator_applies(
    ops_client, ops2_client, ops, ops2, world, kind
):
    """Every create page proposes: nothing exists until someone else approves, the change's
    page shows the plan, and the applied creation's history names the applier and the reason."""
    model = MODELS[kind]
    before = model.objects.count()
    response = ops_client.post(
        reverse(f"{kind}_create"), {**CREATES[kind](world), "reason": f"New {kind}"}
    )
    change = _proposed(response)
    assert model.objects.count() == before  # proposed, not created
    plan = _text(ops_client.get(response["Location"]))
    assert f"Proposed change #{change.pk}." in plan and "created" in plan.lower()
    # The author cannot approve it: four eyes, whatever the page.
    refused = ops_client.post(reverse("change_approve", args=[change.pk]))
    assert refused.status_code == 403
    assert "someone else must approve it" in _text(refused)
    _approve_and_apply(ops2_client, response)
    assert model.objects.count() == before + 1
    created = model.objects.latest("pk")
    first = created.history.earliest()
    assert (first.history_user, first.history_change_reason) == (ops2, f"New {kind}")
    assert first.rule_change_id == change.pk
    assert f"New {kind}" in _text(ops_client.get(created.get_absolute_url() + "history/"))


@pytest.mark.parametrize("kind", list(CREATES))
def test_create_without_a_reason_creates_nothing(ops_client, world, kind):
    model = MODELS[kind]
    before = model.objects.count()
    response = ops_client.post(reverse(f"{kind}_create"), CREATES[kind](world))
    assert response.status_code == 200
    assert "This field is required." in _text(response)
    assert model.objects.count() == before


def test_new_quota_from_a_project_page_starts_with_that_project(ops_client, world):
    response = ops_client.get(reverse("quota_create"), {"project": world.speech.slug})
    field = re.search(r'<input[^>]*name="project"[^>]*>', _text(response))
    assert field is not None and f'value="{world.speech.slug}"' in field.group(0)


def test_a_duplicate_slug_is_a_form_error(ops_client, world):
    response = ops_client.post(
        reverse("project_create"), {"slug": "vision", "name": "Vision 2", "reason": "Again"}
    )
    assert response.status_code == 200
    assert "Project with this Slug already exists." in _text(response)


def test_a_quota_that_overcommits_the_pool_is_not_created(ops_client, world):
    data = {**CREATES["quota"](world), "guarantee": 40, "reason": "Speech on H100"}
    response = ops_client.post(reverse("quota_create"), data)
    assert response.status_code == 200
    assert (
        "Pool “Training” has 32 H100 80G GPUs, but the guarantees in it would add up to 40."
    ) in _text(response)
    assert not Quota.objects.filter(project=world.speech, flavor=world.h100).exists()


def test_ops_sets_pool_capacity(ops_client, ops2_client, world):
    url = reverse("pool_capacity_edit", args=[world.inference.slug])
    response = ops_client.post(
        url, {"flavor": world.h100.pk, "gpus": 8, "reason": "New H100 nodes for serving"}
    )
    change = _approve_and_apply(ops2_client, response)
    assert [(e.field, e.key, e.old_value, e.new_value) for e in change.edits.all()] == [
        ("capacity", world.h100.pk, 0, 8)
    ]
    assert PoolCapacity.objects.get(pool=world.inference, flavor=world.h100).gpus == 8
    history = _text(ops_client.get(reverse("pool_history", args=[world.inference.slug])))
    assert "New H100 nodes for serving" in history
    assert "H100 80G" in history


def test_capacity_below_the_guarantees_is_refused(ops_client, world):
    url = reverse("pool_capacity_edit", args=[world.training.slug])
    response = ops_client.post(
        url, {"flavor": world.a100.pk, "gpus": 30, "reason": "Nodes retired"}
    )
    assert response.status_code == 200
    assert (
        "Pool “Training” has 30 A100 80G GPUs, but the guarantees in it would add up to 40."
    ) in _text(response)
    assert PoolCapacity.objects.get(pool=world.training, flavor=world.a100).gpus == 64
    assert not RuleChange.objects.exists()


def test_ops_adds_changes_and_removes_a_member(ops_client, ops2_client, outsider, world):
    url = reverse("membership_edit", args=[world.vision.slug])
    response = ops_client.post(
        url,
        {
            "action": "set",
            "set-member": outsider.username,
            "set-role": "member",
            "set-reason": "Joins",
        },
    )
    _approve_and_apply(ops2_client, response)
    membership = Membership.objects.get(project=world.vision, user=outsider)
    assert membership.role == ProjectRole.MEMBER

    response = ops_client.post(
        url,
        {
            "action": "set",
            "set-member": outsider.username,
            "set-role": "lead",
            "set-reason": "Promoted",
        },
    )
    _approve_and_apply(ops2_client, response)
    membership.refresh_from_db()
    assert membership.role == ProjectRole.LEAD

    response = ops_client.post(
        url, {"action": "remove", "remove-membership": membership.pk, "remove-reason": "Left"}
    )
    _approve_and_apply(ops2_client, response)
    assert not Membership.objects.filter(project=world.vision, user=outsider).exists()

    history = _text(ops_client.get(reverse("project_history", args=[world.vision.slug])))
    members = history.split("<h2>Members</h2>")[1]
    assert members.index("Left") < members.index("Promoted") < members.index("Joins")
    assert "Deleted" in members
    assert '<td class="changes__old">Member</td>' in members
    assert '<td class="changes__new">Lead</td>' in members


def test_removing_a_member_needs_a_reason(ops_client, lead, world):
    membership = Membership.objects.get(project=world.vision, user=lead)
    response = ops_client.post(
        reverse("membership_edit", args=[world.vision.slug]),
        {"action": "remove", "remove-membership": membership.pk, "remove-reason": ""},
    )
    assert response.status_code == 200
    assert Membership.objects.filter(pk=membership.pk).exists()


def test_a_member_of_another_project_cannot_be_removed_here(ops_client, ops, world):
    other = services.membership_set(
        project=world.speech, member=ops, role=ProjectRole.LEAD, user=ops, reason=REASON
    )
    response = ops_client.post(
        reverse("membership_edit", args=[world.vision.slug]),
        {"action": "remove", "remove-membership": other.pk, "remove-reason": "Wrong project"},
    )
    assert response.status_code == 200
    assert Membership.objects.filter(pk=other.pk).exists()


def test_pool_cannot_become_its_own_grandchild(ops_client, ops, world):
    child = services.pool_create(
        user=ops, reason=REASON, slug="child", name="Child", parent=world.training
    )
    response = ops_client.post(
        reverse("pool_edit", args=[world.training.slug]),
        {"name": "Training", "description": "", "parent": child.pk, "reason": "Loop"},
    )
    assert response.status_code == 200
    assert "A pool cannot sit inside itself or inside one of its children." in _text(response)
    world.training.refresh_from_db()
    assert world.training.parent is None


def test_bad_numbers_never_give_a_server_error(ops_client, world):
    quota = world.vision_a100
    response = ops_client.post(
        reverse("quota_edit", args=[quota.pk]),
        _quota_form(quota, guarantee="-5", borrow_limit="lots", reason="Oops"),
    )
    assert response.status_code == 200
    assert "Enter a whole number." in _text(response)


def test_a_member_cannot_see_edit_forms_but_reads_history(member, world):
    client = login(member)
    assert client.get(reverse("quota_edit", args=[world.vision_a100.pk])).status_code == 403
    history = client.get(reverse("quota_history", args=[world.vision_a100.pk]))
    assert history.status_code == 200
    assert REASON in _text(history)
