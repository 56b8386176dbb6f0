"""What the approvals services share: timeline rows, notifications, dates in texts."""

from collections.abc import Iterable
from datetime import datetime
from functools import partial
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import formats, timezone
from django.utils.translation import gettext, override

from approvals.models import (
    EventAction,
    Notification,
    NotificationEvent,
    RequestEvent,
    UpgradeRequest,
)
from governance.models import GrantKind, User
from governance.models.texts import Message, label, mail_language, message, message_english


def when_text(value: datetime) -> str:
    return formats.date_format(timezone.localtime(value), "DATETIME_FORMAT")


def deciders(request: UpgradeRequest) -> list[User]:
    """The people who have approved or rejected ``request``."""
    return [approval.approver for approval in request.approvals.select_related("approver")]


def event_add(
    *,
    request: UpgradeRequest,
    actor: User,
    action: EventAction,
    at: datetime,
    comment: str = "",
    said: Message | None = None,
) -> RequestEvent:
    """A timeline row; ``comment`` is what someone typed, ``said`` what Arbiter says (a
    ``message``, shown in the reader's language)."""
    return RequestEvent.objects.create(
        request=request,
        actor=actor,
        action=action,
        comment=comment or (message_english(said) if said else ""),
        message=said,
        at=at,
    )


def _mail(subject: str, body: str, recipient: str) -> None:
    send_mail(subject, body, None, [recipient], fail_silently=True)


def _mail_for(user: User, notification: Notification) -> tuple[str, str]:
    """The subject and body of ``notification``'s mail, in ``user``'s language."""
    with override(mail_language(user)):
        text = notification.body
        body = "\n\n".join(
            [
                gettext("Hello %(name)s,") % {"name": user},
                text,
                gettext("The request: %(url)s")
                % {"url": settings.ARBITER_SITE_URL + notification.link},
                gettext("— Arbiter"),
            ]
        )
    return f"[Arbiter] {text}"[:200], body


def notify(
    *,
    users: Iterable[User],
    request: UpgradeRequest,
    event: NotificationEvent,
    template: str,
    at: datetime,
    **params: Any,
) -> list[Notification]:
    """Tell each of ``users`` (each once) about ``request``: an in-app notification, mailed
    after the commit.

    The text is ``template`` (an English message id marked with ``gettext_noop``) with the
    request's ``kind`` and ``project`` and ``params``; it is stored as a message and shown
    (and mailed) in each reader's language. Mails go out only if the change they announce is
    committed. For the expiry reminders, the unique (user, request, event) row is the record
    that the reminder went out: a second call creates nothing and mails nothing.
    """
    said = message(
        template,
        kind=label(GrantKind(request.kind).label, lower=True),
        project=str(request.project),
        **params,
    )
    english = message_english(said)[:500]
    link = request.get_absolute_url()
    created = []
    for user in {user.pk: user for user in users if user and user.is_active}.values():
        try:
            with transaction.atomic():
                notification = Notification.objects.create(
                    user=user,
                    request=request,
                    event=event,
                    text=english,
                    message=said,
                    link=link,
                    created_at=at,
                )
        except IntegrityError:
            continue  # already told (expiry reminders are unique per user and request)
        created.append(notification)
        if user.email:
            subject, body = _mail_for(user, notification)
            transaction.on_commit(partial(_mail, subject, body, user.email))
    return created
