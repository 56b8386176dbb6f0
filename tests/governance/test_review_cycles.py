"""Review cycles of tiers and quotas: what is due, reminders to quota leads, recording a
review (keep, modify, retire) and retiring a tier only when nothing uses it."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from governance import services
from governance.models import (
    ChangeStatus,
    PriorityTier,
    Quota,
    ReminderKind,
    Review,
    ReviewReminder,
)
from tests.conftest import REASON, login

pytestmark = pytest.mark.django_db


@pytest.fixture
def due_quota(world, today):
    """Vision's A100 quota, reviewed 170 days ago on a 180-day cycle: due in 10 days."""
    services.review_record(
        user=world.ops,
        quota=world.vision_a100,
        outcome="keep",
        notes="Initial review",
        today=today - timedelta(days=170),
    )
    return Quota.objects.get(pk=world.vision_a100.pk)


def test_a_new_quota_is_scheduled_for_review(world, today):
    assert world.speech_a100.next_review_on == today + timedelta(days=180)


def test_the_review_page_lists_due_tiers_and_quotas(world, due_quota, member, today):
    services.tier_update(
        tier=world.key,
        user=world.ops,
        reason=REASON,
        data={"last_reviewed_on": today - timedelta(days=95)},
    )
    text = login(member).get(reverse("review_list")).content.decode()
    assert reverse("review_tier", args=["key"]) in text
    assert reverse("review_quota", args=[due_quota.pk]) in text
    assert reverse("review_quota", args=[world.speech_a100.pk]) not in text
    assert "overdue" in text.split("Key project")[1].split("</tr>")[0]


def test_quota_reminders_mail_the_project_leads_once(world, due_quota, today, mailoutbox):
    assert services.review_reminders_send(today=today) == 1
    assert services.review_reminders_send(today=today) == 0
    assert [mail.to for mail in mailoutbox] == [["lead@example.com"]]
    assert "Vision · Training · A100 80G" in mailoutbox[0].subject
    reminder = ReviewReminder.objects.get()
    assert (reminder.quota, reminder.kind) == (due_quota, ReminderKind.DUE_SOON)
    assert services.review_reminders_send(today=today + timedelta(days=11)) == 1
    assert "overdue" in mailoutbox[1].subject.lower()


def test_recording_a_review_sets_the_next_due_date(world, due_quota, lead, today):
    review = services.review_record(
        user=lead, quota=due_quota, outcome="keep", notes="Still the right size", today=today
    )
    due_quota.refresh_from_db()
    assert (due_quota.last_reviewed_on, due_quota.next_review_on) == (
        today,
        today + timedelta(days=due_quota.review_cycle_days),
    )
    assert review.next_review_on == due_quota.next_review_on
    assert review.change is None
    assert due_quota.history.latest().history_user == lead


def test_a_new_review_cycle_is_proposed_as_a_change_a_second_person_applies(
    world, due_quota, ops2, today
):
    review = services.review_record(
        user=world.ops,
        quota=due_quota,
        outcome="keep",
        notes="Check it quarterly",
        review_cycle_days=90,
        today=today,
    )
    due_quota.refresh_from_db()
    # The next review is due after the cycle asked for; the rule waits for its approval.
    assert due_quota.next_review_on == today + timedelta(days=90)
    assert due_quota.review_cycle_days == 180
    assert review.change is not None
    assert [(edit.field, edit.new_value) for edit in review.change.edits.all()] == [
        ("review_cycle_days", 90)
    ]
    with pytest.raises(PermissionDenied):
        services.rule_change_approve(change=review.change, user=world.ops)
    services.rule_change_approve(change=review.change, user=ops2)
    services.rule_change_apply(change=review.change, user=ops2)
    due_quota.refresh_from_db()
    assert due_quota.review_cycle_days == 90


def test_a_lead_records_a_review_but_may_not_change_the_cycle(world, due_quota, lead, today):
    reviews = Review.objects.count()
    with pytest.raises(ValidationError) as refused:
        services.review_record(
            user=lead,
            quota=due_quota,
            outcome="keep",
            notes="Quarterly",
            review_cycle_days=90,
            today=today,
        )
    assert "review_cycle_days" in refused.value.message_dict
    assert Review.objects.count() == reviews
    due_quota.refresh_from_db()
    assert due_quota.review_cycle_days == 180


def test_only_the_owner_lead_or_ops_record_a_review(world, member, approver):
    with pytest.raises(PermissionDenied):
        services.review_record(user=member, quota=world.vision_a100, outcome="keep", notes="x")
    with pytest.raises(PermissionDenied):
        services.review_record(user=approver, tier=world.key, outcome="keep", notes="x")
    assert not Review.objects.exists()


def test_a_used_tier_cannot_retire(world):
    with pytest.raises(ValidationError, match="cannot retire while it is used"):
        services.review_record(
            user=world.ops, tier=world.key, outcome="retire", notes="Nobody needs it"
        )
    assert not Review.objects.exists()
    assert PriorityTier.objects.get(pk=world.key.pk).retired_on is None


def test_an_unused_tier_retires_through_a_change(world, ops2, today):
    review = services.review_record(
        user=world.ops, tier=world.key, outcome="keep", notes="Fine", today=today
    )
    # Move Vision off the key tier first (a change of its own), then retire it.
    move = services.rule_change_create(
        user=world.ops,
        reason="Vision back to regular",
        edits=[services.EditSpec(target=world.vision, field="tier", value=world.regular)],
    )
    services.rule_change_approve(change=move, user=ops2)
    services.rule_change_apply(change=move, user=world.ops)
    review = services.review_record(
        user=world.ops,
        tier=world.key,
        outcome="retire",
        notes="No key project this year",
        today=today,
    )
    assert review.change is not None and review.change.status == ChangeStatus.PROPOSED
    services.rule_change_approve(change=review.change, user=ops2)
    services.rule_change_apply(change=review.change, user=world.ops)
    assert PriorityTier.objects.get(pk=world.key.pk).retired_on == today


def test_review_page_records_and_modify_leads_to_the_edit_page(world, due_quota):
    client = login(world.ops)
    url = reverse("review_quota", args=[due_quota.pk])
    assert 'value="retire"' not in client.get(url).content.decode()
    response = client.post(url, {"outcome": "modify", "notes": "Guarantee too high"})
    assert response["Location"] == reverse("quota_edit", args=[due_quota.pk])
    response = client.post(url, {"outcome": "keep", "notes": ""})
    assert response.status_code == 200
