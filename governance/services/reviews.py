"""Periodic reviews of tiers and quotas: reminding their owners, recording the review.

A reminder is mailed once per subject (a tier to its owner, a quota to its project's
leads), kind (due soon, overdue), due date and recipient: the ``ReviewReminder`` row is the
record that it went out, and its unique constraint is what keeps a second run (or a second
worker) from mailing again.

Recording a review (keep, modify, retire) sets the next due date. Modifying or retiring
changes the rules, so it goes through a rule change like every other edit.
"""

import logging
from datetime import date, timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop, override

from governance.models import (
    PriorityTier,
    Quota,
    ReminderKind,
    Review,
    ReviewOutcome,
    ReviewReminder,
    RuleChange,
    User,
)
from governance.models.texts import label, mail_language, message, message_english
from governance.selectors import (
    quota_review_recipients,
    quotas_due_for_review,
    tiers_due_for_review,
)

from ._history import governed_save, require_reason
from .changes import EditSpec, rule_change_create

logger = logging.getLogger(__name__)


def _reminder_message(*, tier: PriorityTier, kind: str, due_on: date) -> tuple[str, str]:
    values = {
        "tier": tier.name,
        "date": due_on.isoformat(),
        "owner": str(tier.owner),
        "cycle": tier.review_cycle_days,
        "url": settings.ARBITER_SITE_URL + reverse("tier_detail", args=[tier.slug]),
    }
    if kind == ReminderKind.OVERDUE:
        subject = _("Review overdue: tier “%(tier)s” was due on %(date)s") % values
        opening = (
            _(
                "The review of the priority tier “%(tier)s” was due on %(date)s and has not "
                "been recorded yet."
            )
            % values
        )
    else:
        subject = _("Review due on %(date)s: tier “%(tier)s”") % values
        opening = _("The review of the priority tier “%(tier)s” is due on %(date)s.") % values
    body = "\n\n".join(
        [
            _("Hello %(owner)s,") % values,
            opening,
            _(
                "As its business owner, please check that its conditions, caps and preemption "
                "rights still match what the tier is for, then record the review (the tier is "
                "reviewed every %(cycle)d days)."
            )
            % values,
            _("The tier: %(url)s") % values,
            _("— Arbiter"),
        ]
    )
    return subject, body


def _quota_reminder_message(
    *, quota: Quota, lead: User, kind: str, due_on: date
) -> tuple[str, str]:
    values = {
        "quota": str(quota),
        "date": due_on.isoformat(),
        "lead": str(lead),
        "cycle": quota.review_cycle_days,
        "url": settings.ARBITER_SITE_URL + reverse("quota_detail", args=[quota.pk]),
    }
    if kind == ReminderKind.OVERDUE:
        subject = _("Review overdue: quota “%(quota)s” was due on %(date)s") % values
    else:
        subject = _("Review due on %(date)s: quota “%(quota)s”") % values
    body = "\n\n".join(
        [
            _("Hello %(lead)s,") % values,
            _("The review of the quota “%(quota)s” is due on %(date)s.") % values,
            _(
                "As a lead of the project, please check with ops that its guarantee, borrow "
                "limit and preemption class still fit the project's work (the quota is "
                "reviewed every %(cycle)d days)."
            )
            % values,
            _("The quota: %(url)s") % values,
            _("— Arbiter"),
        ]
    )
    return subject, body


def _send_once(*, lookup: dict, recipient: str, subject: str, body: str, label: str) -> bool:
    """Record the reminder and mail it in one transaction; ``True`` when it was sent now."""
    # The row is written first and the mail sent inside the same transaction, before the
    # commit. The unique row makes a concurrent run wait on our insert and then find it, so
    # only one run mails. If sending fails, the transaction rolls back and the next run tries
    # again. A crash after sending but before the commit can mail twice; sending after the
    # commit (on_commit) could instead record a mail that never went out. A duplicate
    # reminder is harmless, a lost one is not.
    try:
        with transaction.atomic():
            _reminder, created = ReviewReminder.objects.get_or_create(
                **lookup, defaults={"recipient": recipient}
            )
            if created:
                send_mail(subject, body, None, [recipient])
    except OSError:  # smtplib's errors are OSErrors; one bad address must not stop the rest
        logger.exception("%s: the review reminder to %s failed.", label, recipient)
        return False
    if created:
        logger.info("%s: %s reminder sent to %s.", label, lookup["kind"], recipient)
    return created


def review_reminders_send(*, today: date) -> int:
    """Mail the owner of every tier, and the leads of every quota's project, whose review is
    due soon or overdue; return the mails sent.

    Safe to run any number of times: a recipient gets at most one mail per subject, kind and
    due date.
    """
    sent = _tier_reminders_send(today=today)
    quotas = [quota for quota in quotas_due_for_review(today=today) if quota.next_review_on]
    leads = quota_review_recipients(quotas=quotas)
    for quota in quotas:
        due_on = quota.next_review_on
        assert due_on is not None
        kind = ReminderKind.OVERDUE if due_on < today else ReminderKind.DUE_SOON
        if not leads[quota.pk]:
            logger.warning(
                "Quota %s: review due on %s, but its project has no lead.", quota.pk, due_on
            )
        for lead in leads[quota.pk]:
            if not lead.email:
                continue
            with override(mail_language(lead)):
                subject, body = _quota_reminder_message(
                    quota=quota, lead=lead, kind=kind, due_on=due_on
                )
            sent += _send_once(
                lookup={"quota": quota, "kind": kind, "due_on": due_on, "recipient": lead.email},
                recipient=lead.email,
                subject=subject,
                body=body,
                label=f"Quota {quota.pk}",
            )
    return sent


def _tier_reminders_send(*, today: date) -> int:
    sent = 0
    for tier in tiers_due_for_review(today=today):
        due_on = tier.next_review_on
        if due_on is None:
            continue
        kind = ReminderKind.OVERDUE if due_on < today else ReminderKind.DUE_SOON
        recipient = tier.owner.email
        if not recipient:
            logger.warning(
                "Tier %s: review due on %s, but its owner %s has no email address.",
                tier.slug,
                due_on,
                tier.owner.username,
            )
            continue
        with override(mail_language(tier.owner)):
            subject, body = _reminder_message(tier=tier, kind=kind, due_on=due_on)
        sent += _send_once(
            lookup={"tier": tier, "kind": kind, "due_on": due_on},
            recipient=recipient,
            subject=subject,
            body=body,
            label=f"Tier {tier.slug}",
        )
    return sent


def _require_may_review(*, user: User, tier: PriorityTier | None, quota: Quota | None) -> None:
    if user.is_service_account:
        # A review is a person's sign-off: a service account never records one.
        raise PermissionDenied(_("A service account may not record a review."))
    if user.is_ops:
        return
    if tier is not None and tier.owner_id == user.pk:
        return
    if quota is not None and quota.project.memberships.filter(user=user, role="lead").exists():
        return
    raise PermissionDenied(
        _("Only ops, a tier's business owner or a quota's project lead may record its review.")
    )


@transaction.atomic
def review_record(
    *,
    user: User,
    outcome: ReviewOutcome | str,
    notes: str,
    tier: PriorityTier | None = None,
    quota: Quota | None = None,
    review_cycle_days: int | None = None,
    today: date | None = None,
) -> Review:
    """Record the review of a tier or a quota and set its next due date.

    ``keep``: the rules stay. ``modify``: the review is recorded; the edit itself is proposed
    as a rule change from the edit page. ``retire`` (tiers only): proposes a rule change that
    retires the tier, which is refused while a project, grant, default or other tier uses it.
    """
    if (tier is None) == (quota is None):
        raise ValueError("Review a tier or a quota.")
    _require_may_review(user=user, tier=tier, quota=quota)
    notes = require_reason(notes)
    today = today or timezone.localdate()
    outcome = ReviewOutcome(outcome)
    change: RuleChange | None = None
    subject = tier if tier is not None else quota
    assert subject is not None
    if outcome == ReviewOutcome.RETIRE:
        if tier is None:
            raise ValidationError({"outcome": _("Only a tier can be retired at its review.")})
        change = rule_change_create(
            user=user,
            reason=notes,
            edits=[EditSpec(target=tier, field="retired_on", value=today)],
            title=message(gettext_noop("Retire the tier “%(tier)s”"), tier=tier.name),
            rollback_condition=gettext_noop("Work that needs the tier appears again."),
        )
    subject = type(subject).objects.select_for_update().get(pk=subject.pk)
    next_review_on = subject.review_due_from(today)
    if review_cycle_days is not None:
        if review_cycle_days < 1:
            raise ValidationError({"review_cycle_days": _("Review at least every day.")})
        # The cycle is a rule like any other: a new one is proposed as a rule change that a
        # second person approves; the next review is due after the cycle the reviewer asked
        # for (the review's own bookkeeping).
        next_review_on = today + timedelta(days=review_cycle_days)
        if change is None and review_cycle_days != subject.review_cycle_days:
            try:
                change = rule_change_create(
                    user=user,
                    reason=notes,
                    edits=[
                        EditSpec(target=subject, field="review_cycle_days", value=review_cycle_days)
                    ],
                )
            except PermissionDenied as refused:
                raise ValidationError({"review_cycle_days": str(refused)}) from refused
    subject.last_reviewed_on = today
    subject.next_review_on = next_review_on
    governed_save(
        subject,
        user=user,
        # Stored in English, shown in the reader's language (governance.models.texts).
        reason=gettext_noop("Reviewed (%(outcome)s): %(notes)s")
        % {"outcome": message_english(label(outcome.label)), "notes": notes},
    )
    review = Review(
        tier=tier,
        quota=quota,
        outcome=outcome,
        notes=notes,
        reviewed_by=user,
        reviewed_on=today,
        next_review_on=subject.next_review_on,
        change=change,
    )
    review.full_clean()
    review.save()
    return review
