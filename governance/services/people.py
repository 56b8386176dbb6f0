"""People: accounts are created without power; roles and activation are governed.

An account made in the portal (the admin) is an inactive member with no usable password.
Its site role, activation and superuser status change only through an approved rule change,
whose apply calls ``user_access_update``. Superuser status is never granted here: the
deployer grants it on the command line (``manage.py createsuperuser``); a change may only
take it away.
"""

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from governance.models import SiteRole, User

from ._access import require_ops
from ._history import apply_fields, governed_save

USER_EDITABLE = ("site_role", "is_active", "is_superuser")


@transaction.atomic
def user_create(
    *,
    user: User,
    reason: str,
    username: str,
    email: str = "",
    first_name: str = "",
    last_name: str = "",
) -> User:
    """A new account: inactive, a member, no password (the owner sets it from a reset link)."""
    require_ops(user)
    person = User(
        username=username,
        email=email,
        first_name=first_name,
        last_name=last_name,
        site_role=SiteRole.MEMBER,
        is_active=False,
        is_staff=False,
        is_superuser=False,
    )
    person.set_unusable_password()
    governed_save(person, user=user, reason=reason)
    return person


@transaction.atomic
def user_access_update(*, person: User, user: User, reason: str, data: dict[str, Any]) -> User:
    """Change ``person``'s site role, activation or superuser status (an applied change)."""
    require_ops(user)
    if data.get("is_superuser") is True:
        raise ValidationError(
            {
                "is_superuser": _(
                    "Superuser status is granted only by the deployer on the command line "
                    "(manage.py createsuperuser)."
                )
            }
        )
    person = User.objects.select_for_update().get(pk=person.pk)
    if apply_fields(person, data, USER_EDITABLE):
        governed_save(person, user=user, reason=reason)
    return person


@transaction.atomic
def user_language_set(*, user: User, language: str) -> User:
    """Remember ``user``'s language: the mails Arbiter sends them are in it."""
    if language not in dict(settings.LANGUAGES):
        raise ValidationError({"language": _("Choose one of the site's languages.")})
    user = User.objects.select_for_update().get(pk=user.pk)
    if user.language != language:
        user.language = language
        governed_save(user, user=user, reason=gettext_noop("Chose a language"))
    return user


@transaction.atomic
def user_site_role_withdraw(*, person: User, user: User, reason: str) -> User:
    """``person`` is a member again, at once: the identity provider's groups claim no longer
    lists the group of their site role. Only ever lowers a role (no approval needed to take
    power away; granting it is a rule change)."""
    person = User.objects.select_for_update().get(pk=person.pk)
    if person.site_role != SiteRole.MEMBER:
        person.site_role = SiteRole.MEMBER
        governed_save(person, user=user, reason=reason)
    return person
