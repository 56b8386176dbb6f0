"""Rollback: one action proposes a change that restores exactly what an applied change
touched; a later change to the same field is a conflict to decide, never overwritten; a
rollback of the rollback returns to the applied values; history is only ever added to."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from governance import selectors, services
from governance.models import ChangeStatus, ConflictChoice, PriorityTier, Quota, RuleChange
from governance.services import EditSpec
from tests.conftest import login

pytestmark = pytest.mark.django_db


def _apply(world, approver, edits, *, user=None, **extra) -> RuleChange:
    change = services.rule_change_create(
        user=user or world.ops, reason="Deadline", edits=edits, **extra
    )
    services.rule_change_approve(change=change, user=approver)
    return services.rule_change_apply(change=change, user=world.ops)


def _approve_apply(change, world, approver) -> RuleChange:
    services.rule_change_approve(change=change, user=approver)
    return services.rule_change_apply(change=change, user=world.ops)


def _quota_values(quota: Quota) -> tuple:
    quota.refresh_from_db()
    return (quota.guarantee, quota.lending_limit, quota.preemption_class_id)


def test_rollback_restores_exactly_the_prior_values_and_a_double_rollback_returns(world, ops2):
    quota = world.vision_a100
    before = _quota_values(quota)
    change = _apply(
        world,
        ops2,
        [
            EditSpec(target=quota, field="guarantee", value=30),
            EditSpec(target=quota, field="lending_limit", value=20),
            EditSpec(target=quota, field="preemption_class", value=world.forbidden),
        ],
        confirmation_reason="One deadline plan",
    )
    applied = _quota_values(quota)
    assert applied == (30, 20, world.forbidden.pk)
    fair_share_before = Quota.objects.get(pk=quota.pk).fair_share_weight

    rollback = services.rule_change_rollback(
        change=change, user=world.ops, reason="Waits of critical jobs went up"
    )
    assert rollback.status == ChangeStatus.PROPOSED
    assert rollback.rollback_of == change
    assert {(e.field, e.old_value, e.new_value) for e in rollback.edits.all()} == {
        ("guarantee", 30, 24),
        ("lending_limit", 20, 12),
        ("preemption_class", world.forbidden.pk, world.cautious.pk),
    }
    _approve_apply(rollback, world, ops2)
    assert _quota_values(quota) == before
    assert Quota.objects.get(pk=quota.pk).fair_share_weight == fair_share_before
    change.refresh_from_db()
    assert change.status == ChangeStatus.ROLLED_BACK

    again = services.rule_change_rollback(
        change=rollback, user=world.ops, reason="The waits were unrelated"
    )
    _approve_apply(again, world, ops2)
    assert _quota_values(quota) == applied
    # Every step left its own history row; none was edited or removed.
    assert [row.rule_change_id for row in quota.history.order_by("history_id")][-3:] == [
        change.pk,
        rollback.pk,
        again.pk,
    ]


def test_a_later_change_is_a_conflict_that_must_be_decided(world, ops2):
    quota = world.vision_a100
    change = _apply(
        world,
        ops2,
        [
            EditSpec(target=quota, field="guarantee", value=30),
            EditSpec(target=quota, field="fair_share_weight", value=5),
        ],
    )
    later = services.rule_change_create(
        user=ops2,
        reason="More still",
        edits=[EditSpec(target=quota, field="guarantee", value=32)],
        confirmation_reason="Agreed with the project",
    )
    services.rule_change_approve(change=later, user=world.ops)
    services.rule_change_apply(change=later, user=world.ops)

    with pytest.raises(ValidationError) as error:
        services.rule_change_rollback(change=change, user=world.ops, reason="Undo")
    assert "choose, field by field" in str(error.value)
    assert not RuleChange.objects.filter(rollback_of=change).exists()
    assert Quota.objects.get(pk=quota.pk).guarantee == 32  # not overwritten

    guarantee = change.edits.get(field="guarantee")
    keep = services.rule_change_rollback(
        change=change,
        user=world.ops,
        reason="Undo the weight only",
        choices={guarantee.pk: ConflictChoice.KEEP},
        confirmation_reason="Rolling back inside the window of the later change",
    )
    assert [(e.field, e.old_value, e.new_value) for e in keep.edits.all()] == [
        ("fair_share_weight", 5, 3)
    ]
    services.rule_change_withdraw(change=keep, user=world.ops)

    restore = services.rule_change_rollback(
        change=change,
        user=world.ops,
        reason="Undo everything",
        choices={guarantee.pk: "restore"},
        confirmation_reason="Both fields, on purpose",
    )
    assert {(e.field, e.old_value, e.new_value) for e in restore.edits.all()} == {
        ("guarantee", 32, 24),
        ("fair_share_weight", 5, 3),
    }
    _approve_apply(restore, world, ops2)
    assert Quota.objects.get(pk=quota.pk).guarantee == 24


def test_only_an_applied_change_is_rolled_back_and_only_once_at_a_time(world, ops2):
    quota = world.vision_a100
    proposed = services.rule_change_create(
        user=world.ops, reason="Grow", edits=[EditSpec(target=quota, field="guarantee", value=30)]
    )
    with pytest.raises(ValidationError, match="Only an applied change can be rolled back"):
        services.rule_change_rollback(change=proposed, user=world.ops, reason="Undo")
    applied = _approve_apply(proposed, world, ops2)
    services.rule_change_rollback(change=applied, user=world.ops, reason="Undo")
    with pytest.raises(ValidationError, match="already proposes to roll it back"):
        services.rule_change_rollback(change=applied, user=world.ops, reason="Undo again")


def test_rollback_of_a_tier_change_needs_the_tier_owner(world, ops2, approver):
    services.tier_update(tier=world.key, user=world.ops, reason="Owner", data={"owner": approver})
    change = _apply(world, approver, [EditSpec(target=world.key, field="max_gpus_total", value=40)])
    rollback = services.rule_change_rollback(change=change, user=world.ops, reason="Too small")
    assert selectors.approval_problem(change=rollback, user=ops2) is not None
    _approve_apply(rollback, world, approver)
    assert PriorityTier.objects.get(pk=world.key.pk).max_gpus_total is None


def test_rollback_page_shows_conflicts_and_proposes(world, ops2):
    quota = world.vision_a100
    change = _apply(world, ops2, [EditSpec(target=quota, field="guarantee", value=30)])
    later = services.rule_change_create(
        user=ops2,
        reason="More",
        edits=[EditSpec(target=quota, field="guarantee", value=32)],
        confirmation_reason="Agreed",
    )
    services.rule_change_approve(change=later, user=world.ops)
    services.rule_change_apply(change=later, user=world.ops)
    guarantee = change.edits.get()

    client = login(world.ops)
    url = reverse("change_rollback", args=[change.pk])
    page = client.get(url).content.decode()
    assert "Conflict: changed since" in page
    assert f'name="choice_{guarantee.pk}"' in page

    response = client.post(url, {"reason": "Undo"})
    assert response.status_code == 200
    assert not RuleChange.objects.filter(rollback_of=change).exists()

    response = client.post(
        url,
        {
            "reason": "Undo",
            f"choice_{guarantee.pk}": "restore",
            "confirmation_reason": "On purpose",
        },
    )
    rollback = RuleChange.objects.get(rollback_of=change)
    assert response["Location"] == reverse("change_detail", args=[rollback.pk])
    assert Quota.objects.get(pk=quota.pk).guarantee == 32  # proposed, not applied


def test_history_and_changes_cannot_be_changed_through_any_page_or_api(world, ops2, admin_user):
    change = _apply(world, ops2, [EditSpec(target=world.vision_a100, field="guarantee", value=30)])
    rows = list(Quota.history.values_list("history_id", "guarantee", "history_change_reason"))
    snapshot = (change.status, change.title, change.edits.get().new_value)
    ops = login(world.ops)
    api = login(world.ops)

    quota_history = reverse("quota_history", args=[world.vision_a100.pk])
    for method in ("post", "put", "patch", "delete"):
        getattr(ops, method)(quota_history)
        for url in (
            reverse("api_change_detail", args=[change.pk]),
            reverse("api_change_list"),
            reverse("api_quota_history", args=[world.vision_a100.pk]),
        ):
            assert getattr(api, method)(url, content_type="application/json").status_code == 405
        # A rule's PATCH and DELETE only propose a change (here without a reason: a 400).
        quota = reverse("api_quota_detail", args=[world.vision_a100.pk])
        answer = getattr(api, method)(quota, content_type="application/json").status_code
        assert answer == (400 if method in ("patch", "delete") else 405)
        assert getattr(ops, method)(reverse("change_detail", args=[change.pk])).status_code in (
            200,
            405,
        )
    # Deciding again does nothing to an applied change.
    for name in ("change_approve", "change_reject", "change_withdraw", "change_apply"):
        ops.post(reverse(name, args=[change.pk]), {"note": "again"})
    # The admin is read-only for changes, edits and history, even for a superuser.
    admin = login(admin_user)
    history_row = world.vision_a100.history.latest()
    for url in (
        reverse("admin:governance_rulechange_change", args=[change.pk]),
        reverse("admin:governance_rulechange_delete", args=[change.pk]),
        reverse(
            "admin:governance_quota_simple_history",
            args=[world.vision_a100.pk, history_row.history_id],
        ),
    ):
        admin.post(url, {"post": "yes", "title": "Rewritten", "guarantee": 1})

    assert (
        list(Quota.history.values_list("history_id", "guarantee", "history_change_reason")) == rows
    )
    change.refresh_from_db()
    assert (change.status, change.title, change.edits.get().new_value) == snapshot
