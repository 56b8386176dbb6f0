"""Applying a rule change: all its edits in one transaction, each history row pointing to it,
a rules revision after commit, and only once."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from governance import services
from governance.models import (
    ChangeStatus,
    PoolCapacity,
    PriorityTier,
    Quota,
    RevisionTrigger,
    RuleChange,
    RulesRevision,
)
from governance.services import EditSpec

pytestmark = pytest.mark.django_db


def _propose(world, edits, **extra) -> RuleChange:
    return services.rule_change_create(
        user=world.ops, reason="Model v3 deadline", edits=edits, **extra
    )


def test_a_change_records_old_and_new_values_and_waits_for_approval(world):
    quota = world.vision_a100
    change = _propose(world, [EditSpec(target=quota, field="guarantee", value=30)])

    assert change.status == ChangeStatus.PROPOSED
    assert change.proposed_by == world.ops
    assert [(e.field, e.old_value, e.new_value, e.kind) for e in change.edits.all()] == [
        ("guarantee", 24, 30, "quota")
    ]
    quota.refresh_from_db()
    assert quota.guarantee == 24  # nothing applied before approval
    assert not quota.history.filter(rule_change=change).exists()


def test_unchanged_fields_are_left_out_and_no_change_at_all_is_refused(world):
    quota = world.vision_a100
    change = _propose(
        world,
        [
            EditSpec(target=quota, field="guarantee", value=30),
            EditSpec(target=quota, field="borrow_limit", value=16),
        ],
    )
    assert [edit.field for edit in change.edits.all()] == ["guarantee"]
    with pytest.raises(ValidationError, match="Nothing would change"):
        _propose(world, [EditSpec(target=quota, field="borrow_limit", value=16)])


def test_apply_writes_every_edit_and_links_history_to_the_change(
    world, ops2, django_capture_on_commit_callbacks, settings
):
    settings.ARBITER_ON_RULES_CHANGED = ["tests.governance.test_change_apply.record_sync"]
    RECORDED.clear()
    change = _propose(
        world,
        [
            EditSpec(target=world.vision_a100, field="guarantee", value=30),
            EditSpec(target=world.vision_a100, field="lending_limit", value=20),
            EditSpec(target=world.speech_a100, field="borrow_limit", value=4),
        ],
        confirmation_reason="Both quotas are part of the same deadline plan",
    )
    services.rule_change_approve(change=change, user=ops2)
    with django_capture_on_commit_callbacks(execute=True):
        applied = services.rule_change_apply(change=change, user=world.ops)

    assert applied.status == ChangeStatus.APPLIED
    assert (applied.approved_by, applied.applied_by) == (ops2, world.ops)
    assert applied.approved_at and applied.applied_at
    vision = Quota.objects.get(pk=world.vision_a100.pk)
    assert (vision.guarantee, vision.lending_limit) == (30, 20)
    assert Quota.objects.get(pk=world.speech_a100.pk).borrow_limit == 4
    # One history row per object, each naming the change, with its reason and the applier.
    rows = Quota.history.filter(rule_change=change)
    assert rows.count() == 2
    assert {(r.history_user, r.history_change_reason) for r in rows} == {
        (world.ops, "Model v3 deadline")
    }
    revision = RulesRevision.objects.latest("pk")
    assert revision.trigger == RevisionTrigger.RULE_CHANGE
    assert f"#{change.pk}" in revision.note
    assert [revision.pk] == RECORDED


RECORDED: list[int] = []


def record_sync(*, revision_id: int) -> None:
    RECORDED.append(revision_id)


def test_a_failing_third_edit_leaves_the_first_two_unapplied(world, ops2):
    change = _propose(
        world,
        [
            EditSpec(target=world.exploratory, field="max_gpus_per_job", value=4),
            EditSpec(target=world.vision_a100, field="fair_share_weight", value=5),
            EditSpec(target=world.speech_a100, field="guarantee", value=20),
        ],
        confirmation_reason="One plan",
    )
    services.rule_change_approve(change=change, user=ops2)
    # Meanwhile the pool shrinks (through a change of its own), so the third edit no longer
    # fits: 24 + 20 = 44 guaranteed in a pool of 40.
    shrink = _propose(
        world,
        [EditSpec(target=world.training, field="capacity", key=world.a100, value=40)],
    )
    services.rule_change_approve(change=shrink, user=ops2)
    services.rule_change_apply(change=shrink, user=world.ops)

    with pytest.raises(ValidationError, match="would add up to 44"):
        services.rule_change_apply(change=change, user=world.ops)

    assert PriorityTier.objects.get(pk=world.exploratory.pk).max_gpus_per_job is None
    assert Quota.objects.get(pk=world.vision_a100.pk).fair_share_weight == 3
    assert Quota.objects.get(pk=world.speech_a100.pk).guarantee == 16
    assert RuleChange.objects.get(pk=change.pk).status == ChangeStatus.APPROVED
    assert not Quota.history.filter(rule_change=change).exists()
    assert not PriorityTier.history.filter(rule_change=change).exists()
    assert PoolCapacity.objects.get(pool=world.training, flavor=world.a100).gpus == 40


def test_a_change_that_breaks_an_invariant_is_refused_when_proposed(world):
    with pytest.raises(ValidationError, match="would add up to 76"):
        _propose(world, [EditSpec(target=world.vision_a100, field="guarantee", value=60)])
    assert not RuleChange.objects.exists()


def test_applying_twice_is_refused_clearly(world, ops2):
    change = _propose(world, [EditSpec(target=world.vision_a100, field="guarantee", value=30)])
    services.rule_change_approve(change=change, user=ops2)
    services.rule_change_apply(change=change, user=world.ops)
    with pytest.raises(ValidationError, match=f"Change #{change.pk} was already applied."):
        services.rule_change_apply(change=change, user=ops2)
    assert Quota.history.filter(rule_change=change).count() == 1


def test_an_unapproved_change_cannot_be_applied(world):
    change = _propose(world, [EditSpec(target=world.vision_a100, field="guarantee", value=30)])
    with pytest.raises(ValidationError, match="is proposed"):
        services.rule_change_apply(change=change, user=world.ops)


def test_only_ops_apply(world, ops2, member):
    change = _propose(world, [EditSpec(target=world.vision_a100, field="guarantee", value=30)])
    services.rule_change_approve(change=change, user=ops2)
    with pytest.raises(PermissionDenied):
        services.rule_change_apply(change=change, user=member)


def test_a_field_edited_since_the_proposal_is_not_overwritten(world, ops2):
    first = _propose(world, [EditSpec(target=world.vision_a100, field="guarantee", value=30)])
    second = services.rule_change_create(
        user=ops2,
        reason="Smaller",
        edits=[EditSpec(target=world.vision_a100, field="guarantee", value=20)],
    )
    services.rule_change_approve(change=first, user=ops2)
    services.rule_change_approve(change=second, user=world.ops)
    services.rule_change_apply(change=second, user=world.ops)
    with pytest.raises(ValidationError, match="would overwrite a later edit"):
        services.rule_change_apply(change=first, user=world.ops)
    assert Quota.objects.get(pk=world.vision_a100.pk).guarantee == 20


def test_capacity_membership_and_many_to_many_edits_apply(world, ops2, outsider):
    change = _propose(
        world,
        [
            EditSpec(target=world.inference, field="capacity", key=world.h100, value=8),
            EditSpec(target=world.vision, field="membership", key=outsider, value="lead"),
            EditSpec(
                target=world.production,
                field="preemptible_tiers",
                value=[world.key, world.regular, world.exploratory],
            ),
        ],
        confirmation_reason="Set-up of the new serving nodes",
    )
    edits = {edit.field: edit for edit in change.edits.all()}
    assert (edits["capacity"].old_value, edits["capacity"].new_value) == (0, 8)
    assert (edits["membership"].old_value, edits["membership"].new_value) == (None, "lead")
    assert edits["preemptible_tiers"].old_value == sorted([world.regular.pk, world.exploratory.pk])
    services.rule_change_approve(change=change, user=ops2)
    services.rule_change_apply(change=change, user=world.ops)

    assert PoolCapacity.objects.get(pool=world.inference, flavor=world.h100).gpus == 8
    assert world.vision.memberships.get(user=outsider).role == "lead"
    assert set(world.production.preemptible_tiers.all()) == {
        world.key,
        world.regular,
        world.exploratory,
    }
    assert PriorityTier.history.filter(rule_change=change).count() == 1


def test_a_key_deleted_since_the_proposal_is_a_clear_error(world, ops2):
    """A pool's GPUs of a flavor, proposed; the flavor, which nothing used yet, is deleted by
    another change before this one is applied: a 400 naming it, not a DoesNotExist (500)."""
    tpu = services.flavor_create(
        user=world.ops, reason="Trial", slug="tpu", name="TPU", gpu_model="TPU", memory_gb=16
    )
    capacity = _propose(
        world, [EditSpec(target=world.inference, field="capacity", key=tpu, value=4)]
    )
    services.rule_change_approve(change=capacity, user=ops2)
    delete = services.rule_object_propose_delete(obj=tpu, user=world.ops, reason="Trial over")
    services.rule_change_approve(change=delete, user=ops2)
    services.rule_change_apply(change=delete, user=world.ops)

    with pytest.raises(ValidationError, match="no longer exists"):
        services.rule_change_apply(change=capacity, user=world.ops)
    assert RuleChange.objects.get(pk=capacity.pk).status == ChangeStatus.APPROVED
    assert not PoolCapacity.objects.filter(pool=world.inference, flavor__slug="tpu").exists()
