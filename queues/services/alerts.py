"""Alerts: raise, update and close them; mail each recipient once.

A periodic check calls ``alert_raise`` every time it finds a condition and ``alert_close``
when the condition is gone. Raising an alert that is already open only refreshes its details
(and adds any new recipient), so a check that runs every minute sends one mail, not one a
minute. Mail goes out after the transaction commits, through ``queues.tasks.alert_mail``.
"""

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import override

from governance.models import User
from governance.models.texts import mail_language
from governance.services import task_send
from queues.models import Alert, AlertKind, AlertRecipient, Cluster


def _open_alert(*, kind: AlertKind, key: str) -> Alert | None:
    return Alert.objects.select_for_update().filter(kind=kind, key=key, closed_at=None).first()


@transaction.atomic
def alert_raise(
    *,
    kind: AlertKind,
    key: str,
    recipients: Iterable[User],
    details: dict[str, Any],
    cluster: Cluster | None = None,
    now: datetime | None = None,
) -> Alert:
    """Open the alert for ``(kind, key)``, or refresh the one already open; return it."""
    now = now or timezone.now()
    alert = _open_alert(kind=kind, key=key)
    if alert is None:
        alert = Alert(kind=kind, key=key, cluster=cluster, opened_at=now)
    alert.details = {**alert.details, **details}
    alert.updated_at = now
    alert.full_clean(validate_constraints=False)
    try:
        with transaction.atomic():
            alert.save()
    except IntegrityError:
        # Another check opened it between our read and our insert: refresh that one.
        alert = _open_alert(kind=kind, key=key)
        if alert is None:  # pragma: no cover - closed again in between; nothing to add
            raise
        alert.details = {**alert.details, **details}
        alert.updated_at = now
        alert.save(update_fields=["details", "updated_at"])
    known = set(alert.deliveries.values_list("user_id", flat=True))
    new = [
        AlertRecipient(alert=alert, user=user)
        for user in {user.pk: user for user in recipients}.values()
        if user.pk not in known
    ]
    if new:
        AlertRecipient.objects.bulk_create(new, ignore_conflicts=True)
        transaction.on_commit(lambda: _queue_mail(alert.pk))
    return alert


def _queue_mail(alert_id: int) -> None:
    task_send(task="queues.tasks.alert_mail", args=(alert_id,))


@transaction.atomic
def alert_close(
    *,
    kind: AlertKind,
    key: str,
    details: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> Alert | None:
    """Close the open alert for ``(kind, key)`` (with final details); None if none is open."""
    alert = _open_alert(kind=kind, key=key)
    if alert is None:
        return None
    now = now or timezone.now()
    alert.details = {**alert.details, **(details or {})}
    alert.updated_at = now
    alert.closed_at = max(now, alert.opened_at)
    alert.full_clean(validate_constraints=False)
    alert.save(update_fields=["details", "updated_at", "closed_at"])
    return alert


def alert_mail_send(*, alert_id: int, now: datetime | None = None) -> int:
    """Mail every recipient of the alert not mailed yet; return how many were mailed.

    Idempotent: each recipient row is claimed under a row lock before its mail goes out.
    """
    from queues.selectors import alert_text  # selectors render; services decide

    now = now or timezone.now()
    alert = Alert.objects.filter(pk=alert_id).first()
    if alert is None:
        return 0
    sent = 0
    pending = AlertRecipient.objects.filter(alert=alert, mailed_at=None).values_list(
        "pk", flat=True
    )
    for pk in list(pending):
        with transaction.atomic():
            delivery = (
                AlertRecipient.objects.select_for_update(skip_locked=True)
                .select_related("user")
                .filter(pk=pk, mailed_at=None)
                .first()
            )
            if delivery is None or not delivery.user.email:
                continue
            with override(mail_language(delivery.user)):  # the recipient's language
                subject, body = alert_text(alert)
            send_mail(f"[Arbiter] {subject}", body, None, [delivery.user.email])
            delivery.mailed_at = now
            delivery.save(update_fields=["mailed_at"])
            sent += 1
    return sent


def alerts_mark_read(
    *, user: User, ids: list[int] | None = None, now: datetime | None = None
) -> int:
    """Mark ``user``'s unread alerts read (only ``ids``, when given); return how many."""
    now = now or timezone.now()
    unread = AlertRecipient.objects.filter(user=user, read_at=None)
    if ids is not None:
        unread = unread.filter(alert_id__in=ids)
    marked = 0
    for delivery in unread:
        delivery.read_at = now
        delivery.save(update_fields=["read_at"])
        marked += 1
    return marked
