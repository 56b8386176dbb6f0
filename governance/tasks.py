"""Celery tasks of governance. Each one only calls a service."""

from celery import shared_task
from django.utils import timezone

from governance import services


@shared_task
def review_reminders_send() -> int:
    """Mail tier owners whose review is due soon or overdue (idempotent; run by beat)."""
    return services.review_reminders_send(today=timezone.localdate())
