"""People as the portal shows them: who holds which site role, who is active."""

from datetime import timedelta
from typing import Any

from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext, gettext_lazy

from governance.models import User

from .lists import Sorts, search_filter, sorted_by
from .rules import _scoped_get

PERSON_SORTS: Sorts = {
    "username": (gettext_lazy("Username"), ("username",)),
    "site_role": (gettext_lazy("Site role"), ("site_role", "username")),
}


def person_list(*, q: str | None = None, sort: str | None = None) -> QuerySet[User]:
    people = search_filter(
        User.objects.all(), query=q, fields=["username", "first_name", "last_name"]
    )
    return sorted_by(people, sort=sort, sorts=PERSON_SORTS)


def person_get(*, user: Any, username: str, for_edit: bool = False) -> User:
    """A person by username: readable by everyone signed in; ops may propose access changes
    (404 for anyone not signed in, 403 to edit without the ops role)."""
    return _scoped_get(person_list(), user=user, for_edit=for_edit, username=username)


def login_cool_off(request: HttpRequest | None = None) -> timedelta:
    """django-axes' lockout time, with back-off: the first lockout lasts
    ``ARBITER_LOGIN_COOLOFF_MINUTES``; every further wrong password for the same username from
    the same address doubles it, up to a day."""
    base = timedelta(minutes=settings.ARBITER_LOGIN_COOLOFF_MINUTES)
    if request is None:
        return base
    username = request.POST.get("username", "") if request.method == "POST" else ""
    address = getattr(request, "axes_ip_address", None)
    if not username or not address:
        return base
    failures = (
        AccessAttempt.objects.filter(username=username, ip_address=address)
        .values_list("failures_since_start", flat=True)
        .first()
    ) or 0
    extra = max(0, failures - settings.AXES_FAILURE_LIMIT)
    return min(base * (2 ** min(extra, 16)), timedelta(days=1))


def is_break_glass(person: Any) -> bool:
    """A break-glass account: named in ``ARBITER_BREAK_GLASS_USERS`` (the deployer's list of
    local accounts kept for when the identity provider is down). It may sign in with its
    password while ``ARBITER_LOCAL_LOGIN`` is off, and may get a password link."""
    return bool(person.username) and person.username in settings.ARBITER_BREAK_GLASS_USERS


def password_link_refusal(person: Any) -> str:
    """Why ``person`` may not get a password link by mail (a reset, or a first password), or
    "" when they may. Never for a service account; never for an account linked to the
    identity provider (its sign-in is the provider's, and a password would outlive a
    disabling there); never while local passwords are off. Break-glass accounts excepted
    (all but the first)."""
    if person.is_service_account or not person.is_active:
        return gettext("This account never signs in with a password.")
    if is_break_glass(person):
        return ""
    if not settings.ARBITER_LOCAL_LOGIN:
        return gettext(
            "Signing in with a password is switched off here (ARBITER_LOCAL_LOGIN): no password "
            "links are sent. Sign in through the identity provider."
        )
    if person.provider_identities.exists():
        return gettext(
            "This account signs in through the identity provider: Arbiter sends it no password "
            "link. Sign in through the identity provider."
        )
    return ""
