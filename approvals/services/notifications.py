"""Reading notifications: marking them read."""

from datetime import datetime

from django.utils import timezone

from approvals.models import Notification
from governance.models import User


def notifications_mark_read(
    *, user: User, ids: list[int] | None = None, now: datetime | None = None
) -> int:
    """Mark ``user``'s unread notifications read (only ``ids``, when given); return how many."""
    now = now or timezone.now()
    unread = Notification.objects.filter(user=user, read_at__isnull=True)
    if ids is not None:
        unread = unread.filter(pk__in=ids)
    return unread.update(read_at=now)
