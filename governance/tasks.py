"""Celery tasks of governance. Each one only calls a service."""

from celery import shared_task
from django.conf import settings
from django.contrib import auth
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


@shared_task
def identities_recheck() -> list[int]:
    """Ask the identity provider about everyone linked to it who still holds a token or a
    session and was not confirmed lately; revoke what the disabled hold (idempotent; every
    minute, so that it happens within ARBITER_OIDC_RECHECK_MINUTES)."""
    if not settings.ARBITER_OIDC_ENABLED:
        return []
    # The provider is asked through the configured authentication backend that can (the
    # identity provider's, in AUTHENTICATION_BACKENDS), as Django loads a session's person.
    for backend in auth.get_backends():
        redeem = getattr(backend, "refresh_grant", None)
        if redeem is not None:
            return services.identities_recheck_due(
                now=timezone.now(),
                redeem=redeem,
                every_seconds=max(0, settings.ARBITER_OIDC_RECHECK_MINUTES * 60 - 60),
            )
    return []
