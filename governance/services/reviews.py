"""Reminding tier owners that a tier's review is due.

A reminder is mailed once per tier, kind (due soon, overdue) and due date: the
``ReviewReminder`` row is the record that it went out, and its unique constraint is what
keeps a second run (or a second worker) from mailing again.
"""

import logging
from datetime import date

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils.translation import gettext as _

from governance.models import PriorityTier, ReminderKind, ReviewReminder
from governance.selectors import tiers_due_for_review

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


def review_reminders_send(*, today: date) -> int:
    """Mail the owner of every tier whose review is due soon or overdue; return the mails sent.

    Safe to run any number of times: a tier gets at most one mail per kind and due date.
    """
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
        subject, body = _reminder_message(tier=tier, kind=kind, due_on=due_on)
        # The row is written first and the mail sent inside the same transaction, before the
        # commit. The unique (tier, kind, due_on) row makes a concurrent run wait on our insert
        # and then find it, so only one run mails. If sending fails, the transaction rolls
        # back and the next run tries again. A crash after sending but before the commit can
        # mail twice; sending after the commit (on_commit) could instead record a mail that
        # never went out. A duplicate reminder is harmless, a lost one is not.
        try:
            with transaction.atomic():
                _reminder, created = ReviewReminder.objects.get_or_create(
                    tier=tier, kind=kind, due_on=due_on, defaults={"recipient": recipient}
                )
                if created:
                    send_mail(subject, body, None, [recipient])
        except OSError:  # smtplib's errors are OSErrors; one bad address must not stop the rest
            logger.exception("Tier %s: the review reminder to %s failed.", tier.slug, recipient)
            continue
        if created:
            sent += 1
            logger.info("Tier %s: %s reminder sent to %s.", tier.slug, kind, recipient)
    return sent
