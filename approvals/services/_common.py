"""What the approvals services share: timeline rows, notifications, dates in texts."""

from collections.abc import Iterable
from datetime import datetime
from functools import partial

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import formats, timezone
from django.utils.translation import gettext as _

from approvals.models import (
    EventAction,
    Notification,
    NotificationEvent,
    RequestEvent,
    UpgradeRequest,
)
from governance.models import User


def when_text(value: datetime) -> str:
    return formats.date_format(timezone.localtime(value), "DATETIME_FORMAT")


def deciders(request: UpgradeRequest) -> list[User]:
    """The people who have approved or rejected ``request``."""
    return [approval.approver for approval in request.approvals.select_related("approver")]


def event_add(
    *, request: UpgradeRequest, actor: User, action: EventAction, at: datetime, comment: str = ""
) -> RequestEvent:
    return RequestEvent.objects.create(
        request=request, actor=actor, action=action, comment=comment, at=at
    )


def _mail(subject: str, body: str, recipient: str) -> None:
    send_mail(subject, body, None, [recipient], fail_silently=True)


def notify(
    *,
    users: Iterable[User],
    request: UpgradeRequest,
    event: NotificationEvent,
    text: str,
    at: datetime,
) -> list[Notification]:
    """An in-app notification for each of ``users`` (each once), mailed after the commit.

    Mails go out only if the change they announce is committed. For the expiry reminders,
    the unique (user, request, event) row is the record that the reminder went out: a
    second call creates nothing and mails nothing.
    """
    link = request.get_absolute_url()
    created = []
    for user in {user.pk: user for user in users if user and user.is_active}.values():
        try:
            with transaction.atomic():
                notification = Notification.objects.create(
                    user=user, request=request, event=event, text=text, link=link, created_at=at
                )
        except IntegrityError:
            continue  # already told (expiry reminders are unique per user and request)
        created.append(notification)
        if user.email:
            body = "\n\n".join(
                [
                    _("Hello %(name)s,") % {"name": user},
                    text,
                    _("The request: %(url)s") % {"url": settings.ARBITER_SITE_URL + link},
                    _("— Arbiter"),
                ]
            )
            transaction.on_commit(partial(_mail, f"[Arbiter] {text}"[:200], body, user.email))
    return created
