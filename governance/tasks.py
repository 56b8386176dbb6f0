"""Celery tasks of governance. Each one only calls a service."""

from celery import shared_task
from django.utils import timezone

from governance import services


@shared_task
def review_reminders_send() -> int:
    """Mail tier owners whose review is due soon or overdue (idempotent; run by beat)."""
    return services.review_reminders_send(today=timezone.localdate())


@shared_task
def grants_transition() -> list[int]:
    """Activate grants whose time box opened and expire ended ones (idempotent; every minute)."""
    return [grant.pk for grant in services.grants_transition(now=timezone.now())]
