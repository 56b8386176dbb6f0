"""Celery tasks of approvals. Each one only calls a service."""

from celery import shared_task
from django.utils import timezone

from approvals import services


@shared_task
def requests_sync() -> dict[str, int]:
    """Move requests with their grants; remind before and at expiry (idempotent; every minute)."""
    return services.requests_sync(now=timezone.now())


@shared_task
def idempotency_keys_purge() -> int:
    """Delete expired Idempotency-Key rows (idempotent; hourly)."""
    return services.idempotency_keys_purge(now=timezone.now())
