from datetime import timedelta

import pytest
from django.utils import translation

from governance import services
from governance.models import ReminderKind, ReviewReminder
from governance.tasks import review_reminders_send

REASON = "Test set-up"


@pytest.fixture
def key_tier(world, today):
    """The "Key project" tier, owned by ``approver``, with its review due in five days."""
    tier = world.key
    cycle = tier.review_cycle_days
    return services.tier_update(
        tier=tier,
        user=world.ops,
        reason=REASON,
        data={"last_reviewed_on": today - timedelta(days=cycle - 5)},
    )


@pytest.fixture
def owned_by_approver(key_tier, approver, world):
    return services.tier_update(
        tier=key_tier, user=world.ops, reason=REASON, data={"owner": approver}
    )


def _review_every_tier_today(world, today):
    """Every tier of the world is reviewed today, so none is due."""
    for tier in (world.production, world.key, world.regular, world.exploratory):
        services.tier_update(
            tier=tier, user=world.ops, reason=REASON, data={"last_reviewed_on": today}
        )


@pytest.mark.django_db
def test_due_soon_mails_the_owner_once(owned_by_approver, world, today, mailoutbox):
    sent = services.review_reminders_send(today=today)

    assert sent == 1
    assert len(mailoutbox) == 1
    mail = mailoutbox[0]
    due_on = (today + timedelta(days=5)).isoformat()
    assert mail.to == ["approver@example.com"]
    assert "Key project" in mail.subject
    assert due_on in mail.subject
    assert due_on in mail.body
    assert "/tiers/key/" in mail.body
    reminder = ReviewReminder.objects.get()
    assert (reminder.tier, reminder.kind, reminder.recipient) == (
        owned_by_approver,
        ReminderKind.DUE_SOON,
        "approver@example.com",
    )
    assert reminder.due_on == today + timedelta(days=5)


@pytest.mark.django_db
def test_running_twice_mails_once(owned_by_approver, today, mailoutbox):
    services.review_reminders_send(today=today)
    sent_again = services.review_reminders_send(today=today + timedelta(days=1))

    assert sent_again == 0
    assert len(mailoutbox) == 1
    assert ReviewReminder.objects.count() == 1


@pytest.mark.django_db
def test_overdue_sends_a_second_different_mail(owned_by_approver, today, mailoutbox):
    services.review_reminders_send(today=today)

    sent = services.review_reminders_send(today=today + timedelta(days=6))

    assert sent == 1
    assert len(mailoutbox) == 2
    due_soon, overdue = mailoutbox
    assert overdue.subject != due_soon.subject
    assert "overdue" in overdue.subject.lower()
    assert (today + timedelta(days=5)).isoformat() in overdue.subject
    assert sorted(ReviewReminder.objects.values_list("kind", flat=True)) == [
        ReminderKind.DUE_SOON,
        ReminderKind.OVERDUE,
    ]
    assert services.review_reminders_send(today=today + timedelta(days=7)) == 0
    assert len(mailoutbox) == 2


@pytest.mark.django_db
def test_not_due_sends_nothing(world, today, mailoutbox):
    _review_every_tier_today(world, today)

    assert services.review_reminders_send(today=today) == 0
    assert mailoutbox == []
    assert not ReviewReminder.objects.exists()


@pytest.mark.django_db
def test_due_outside_the_window_sends_nothing(key_tier, world, today, settings, mailoutbox):
    settings.ARBITER_REVIEW_DUE_WINDOW_DAYS = 4

    assert services.review_reminders_send(today=today) == 0
    assert mailoutbox == []


@pytest.mark.django_db
def test_owner_without_email_is_skipped_and_others_still_mailed(
    owned_by_approver, world, today, mailoutbox
):
    world.ops.email = ""
    world.ops.save()
    services.tier_update(
        tier=world.production,
        user=world.ops,
        reason=REASON,
        data={"last_reviewed_on": today - timedelta(days=world.production.review_cycle_days)},
    )

    sent = services.review_reminders_send(today=today)

    assert sent == 1
    assert [mail.to for mail in mailoutbox] == [["approver@example.com"]]
    assert list(ReviewReminder.objects.values_list("tier__slug", flat=True)) == ["key"]


@pytest.mark.django_db
def test_a_failed_send_is_not_recorded_and_is_retried(
    owned_by_approver, today, mailoutbox, monkeypatch
):
    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("mail server down")

    monkeypatch.setattr("governance.services.reviews.send_mail", refuse)
    assert services.review_reminders_send(today=today) == 0
    assert not ReviewReminder.objects.exists()

    monkeypatch.undo()
    assert services.review_reminders_send(today=today) == 1
    assert len(mailoutbox) == 1


@pytest.mark.django_db
def test_task_calls_the_service_with_today(owned_by_approver, mailoutbox):
    assert review_reminders_send.apply().get() == 1
    assert review_reminders_send.apply().get() == 0
    assert len(mailoutbox) == 1


@pytest.mark.django_db
def test_the_reminder_is_in_the_owners_language(owned_by_approver, approver, today, mailoutbox):
    services.user_language_set(user=approver, language="zh-hans")
    assert services.review_reminders_send(today=today) == 1
    body = mailoutbox[0].body
    with translation.override("zh-hans"):
        assert translation.gettext("— Arbiter") in body
    assert "Hello" not in body
