"""Who approves: a tier change needs its business owner (or ops when the owner proposed it);
other changes need ops; nobody approves their own change, through a page, the API or the
database."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse

from governance import services
from governance.models import ChangeStatus, RuleChange
from governance.services import EditSpec
from tests.conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def quota_change(world) -> RuleChange:
    return services.rule_change_create(
        user=world.ops,
        reason="Deadline",
        edits=[EditSpec(target=world.vision_a100, field="guarantee", value=30)],
    )


def test_the_proposer_cannot_approve_their_own_change_on_the_page(world, quota_change):
    client = login(world.ops)
    page = client.get(reverse("change_detail", args=[quota_change.pk])).content.decode()
    assert "You proposed this change: someone else must approve it." in page
    assert reverse("change_approve", args=[quota_change.pk]) not in page

    response = client.post(reverse("change_approve", args=[quota_change.pk]))
    assert response.status_code == 403
    quota_change.refresh_from_db()
    assert quota_change.status == ChangeStatus.PROPOSED
    assert quota_change.approved_by is None


def test_the_proposer_cannot_approve_their_own_change_through_the_api(
    world, quota_change, api_client
):
    api_client.force_authenticate(world.ops)
    response = api_client.post(reverse("api_change_approve", args=[quota_change.pk]), {})
    assert response.status_code == 403
    assert response.json() == {
        "error": "permission_denied",
        "detail": "You proposed this change: someone else must approve it.",
        "fields": {},
    }
    quota_change.refresh_from_db()
    assert quota_change.status == ChangeStatus.PROPOSED


def test_the_database_refuses_a_self_approval(world, quota_change):
    quota_change.status = ChangeStatus.APPROVED
    quota_change.approved_by = world.ops
    quota_change.approved_at = quota_change.proposed_at
    with pytest.raises(IntegrityError), transaction.atomic():
        quota_change.save()


def test_another_operator_approves_and_it_is_recorded(world, ops2, quota_change):
    client = login(ops2)
    response = client.post(
        reverse("change_approve", args=[quota_change.pk]), {"note": "Checked the pool"}
    )
    assert response.status_code == 302
    quota_change.refresh_from_db()
    assert quota_change.status == ChangeStatus.APPROVED
    assert quota_change.approved_by == ops2 and quota_change.approved_at is not None
    row = quota_change.history.latest()
    assert (row.history_user, row.history_change_reason) == (ops2, "Checked the pool")


def test_a_quota_change_needs_ops(world, approver, quota_change):
    with pytest.raises(PermissionDenied, match="needs ops"):
        services.rule_change_approve(change=quota_change, user=approver)


def test_a_tier_change_needs_its_owner(world, ops2, approver):
    services.tier_update(tier=world.key, user=world.ops, reason="Owner", data={"owner": approver})
    change = services.rule_change_create(
        user=world.ops,
        reason="Cap the tier",
        edits=[EditSpec(target=world.key, field="max_gpus_total", value=40)],
    )
    with pytest.raises(PermissionDenied, match="needs its business owner"):
        services.rule_change_approve(change=change, user=ops2)
    approved = services.rule_change_approve(change=change, user=approver)
    assert approved.approved_by == approver


def test_the_owner_proposes_and_ops_approves(world, ops2, approver):
    services.tier_update(tier=world.key, user=world.ops, reason="Owner", data={"owner": approver})
    change = services.rule_change_create(
        user=approver,
        reason="Cap my tier",
        edits=[EditSpec(target=world.key, field="max_gpus_total", value=40)],
    )
    with pytest.raises(PermissionDenied):
        services.rule_change_approve(change=change, user=approver)
    services.rule_change_approve(change=change, user=ops2)
    services.rule_change_apply(change=change, user=world.ops)
    world.key.refresh_from_db()
    assert world.key.max_gpus_total == 40


def test_only_ops_or_the_owner_propose(world, approver, member):
    with pytest.raises(PermissionDenied):
        services.rule_change_create(
            user=member,
            reason="Me first",
            edits=[EditSpec(target=world.vision_a100, field="guarantee", value=30)],
        )
    with pytest.raises(PermissionDenied):  # the tier is owned by ops, not by approver
        services.rule_change_create(
            user=approver,
            reason="Cap",
            edits=[EditSpec(target=world.key, field="max_gpus_total", value=40)],
        )


def test_reject_needs_a_note_and_closes_the_change(world, ops2, quota_change):
    with pytest.raises(ValidationError):
        services.rule_change_reject(change=quota_change, user=ops2, note=" ")
    rejected = services.rule_change_reject(change=quota_change, user=ops2, note="Pool is full")
    assert (rejected.status, rejected.closed_by, rejected.close_note) == (
        ChangeStatus.REJECTED,
        ops2,
        "Pool is full",
    )
    with pytest.raises(ValidationError, match="is rejected"):
        services.rule_change_approve(change=rejected, user=ops2)


def test_the_author_withdraws(world, quota_change, member, ops2):
    with pytest.raises(PermissionDenied):
        services.rule_change_withdraw(change=quota_change, user=member)
    # A second ops user decides someone else's change: Withdraw is neither offered nor allowed.
    with pytest.raises(PermissionDenied, match="Only its author"):
        services.rule_change_withdraw(change=quota_change, user=ops2)
    page = login(ops2).get(reverse("change_detail", args=[quota_change.pk])).content.decode()
    assert reverse("change_withdraw", args=[quota_change.pk]) not in page
    assert reverse("change_approve", args=[quota_change.pk]) in page
    own = login(world.ops).get(reverse("change_detail", args=[quota_change.pk])).content.decode()
    assert reverse("change_withdraw", args=[quota_change.pk]) in own
    withdrawn = services.rule_change_withdraw(change=quota_change, user=world.ops, note="Later")
    assert withdrawn.status == ChangeStatus.WITHDRAWN


def test_a_plan_that_mixes_kinds_and_pools_needs_a_confirmation(world):
    edits = [
        EditSpec(target=world.vision_a100, field="guarantee", value=30),
        EditSpec(target=world.inference, field="capacity", key=world.h100, value=8),
        EditSpec(target=world.speech, field="tier", value=world.key),
    ]
    with pytest.raises(ValidationError) as error:
        services.rule_change_create(user=world.ops, reason="Everything at once", edits=edits)
    messages = error.value.message_dict["confirmation_reason"]
    assert any("mixes kinds of rule (capacity, priority, quota)" in m for m in messages)
    assert any("touches 2 pools (Inference, Training)" in m for m in messages)
    assert not RuleChange.objects.exists()

    change = services.rule_change_create(
        user=world.ops,
        reason="Everything at once",
        edits=edits,
        confirmation_reason="The quarterly re-plan, agreed in the review",
    )
    assert len(change.warnings) == 2
    assert change.confirmation_reason == "The quarterly re-plan, agreed in the review"


def test_a_change_inside_the_observation_window_of_an_earlier_one_warns(world, ops2):
    first = services.rule_change_create(
        user=world.ops,
        reason="Grow",
        edits=[EditSpec(target=world.vision_a100, field="guarantee", value=30)],
        observation_days=14,
    )
    services.rule_change_approve(change=first, user=ops2)
    services.rule_change_apply(change=first, user=world.ops)
    with pytest.raises(ValidationError, match=f"Change #{first.pk}"):
        services.rule_change_create(
            user=world.ops,
            reason="Grow more",
            edits=[EditSpec(target=world.speech_a100, field="borrow_limit", value=4)],
        )


def test_an_edit_page_asks_for_the_confirmation_and_keeps_the_input(world, ops2):
    first = services.rule_change_create(
        user=world.ops,
        reason="Grow",
        edits=[EditSpec(target=world.vision_a100, field="guarantee", value=30)],
    )
    services.rule_change_approve(change=first, user=ops2)
    services.rule_change_apply(change=first, user=world.ops)
    client = login(world.ops)
    quota = world.vision_a100
    data = {
        "guarantee": 30,
        "borrow_limit": 16,
        "lending_limit": 12,
        "fair_share_weight": 4,
        "reclaim_grace_minutes": 0,
        "preemption_class": world.cautious.pk,
        "reason": "More weight",
    }
    url = reverse("quota_edit", args=[quota.pk])
    response = client.post(url, data)
    assert response.status_code == 200
    assert "The plan needs your confirmation." in response.content.decode()
    assert f"Change #{first.pk}" in response.content.decode()
    response = client.post(url, {**data, "change-confirmation_reason": "Weight is urgent"})
    assert response.status_code == 302
    assert RuleChange.objects.latest("pk").confirmation_reason == "Weight is urgent"
