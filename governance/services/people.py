"""People: accounts are created without power; roles and activation are governed.

An account made in the portal (the admin) is an inactive member with no usable password.
Its site role, activation and superuser status change only through an approved rule change,
whose apply calls ``user_access_update``. Superuser status is never granted here: the
deployer grants it on the command line (``manage.py createsuperuser``); a change may only
take it away.
"""

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils import translation
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from governance.models import SiteRole, User
from governance.models.users import USERNAME_TAKEN
from governance.selectors.people import password_link_refusal

from ._access import require_ops
from ._history import apply_fields, governed_save
from .tokens import user_tokens_revoke

logger = logging.getLogger("arbiter.people")

USER_EDITABLE = ("site_role", "is_active", "is_superuser")
# A site role's powers, to tell a role removed from a role given.
RANK: dict[str, int] = {SiteRole.MEMBER: 0, SiteRole.APPROVER: 1, SiteRole.OPS: 2}


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
    """A new account: inactive, a member, no password (the owner sets it from a reset link).
    Its username is NFKC-normalised and unique whatever its case."""
    require_ops(user)
    username = User.normalize_username(username)
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationError({"username": USERNAME_TAKEN})
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
    before = (person.is_active, RANK[person.site_role], person.is_superuser)
    if apply_fields(person, data, USER_EDITABLE):
        governed_save(person, user=user, reason=reason)
        if person.is_active and not before[0] and not person.has_usable_password():
            # Activated without a password yet (made in the admin): an invitation to set one.
            person_id = person.pk
            transaction.on_commit(lambda: user_invitation_send(person_id=person_id))
        after = (person.is_active, RANK[person.site_role], person.is_superuser)
        if any(now < then for now, then in zip(after, before, strict=True)):
            # Deactivated or a role taken away: the tokens made with the old powers end.
            revoked = user_tokens_revoke(
                owner=person,
                user=user,
                reason=gettext_noop("Deactivated or a role removed: every token revoked"),
            )
            tokens_revoked_notify(person=person, count=revoked)
    return person


def tokens_revoked_notify(*, person: User, count: int) -> None:
    """After commit, tell ``person`` by mail that their access shrank and ``count`` tokens of
    theirs were revoked (nothing when none were)."""
    if not count or not person.email:
        return
    address, language = person.email, person.language or settings.LANGUAGE_CODE

    def send() -> None:
        with translation.override(language):
            subject = _("Your Arbiter access changed: your API tokens were revoked")
            body = _(
                "Your account was deactivated or a role of yours was removed, so the %(count)d "
                "API token(s) you held were revoked. If you still need one, make a new one on "
                "the Tokens page once you may."
            ) % {"count": count}
        send_mail(subject, body, None, [address])

    transaction.on_commit(send)


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
def user_password_set(*, person: User, password: str) -> int:
    """``person`` sets their password from a link by mail; every token they hold is revoked
    (whoever knew the old password may have made one): how many were revoked."""
    person = User.objects.select_for_update().get(pk=person.pk)
    person.set_password(password)
    reason = gettext_noop("Password set from a link by mail: every token revoked")
    governed_save(person, user=person, reason=reason)
    return user_tokens_revoke(owner=person, user=person, reason=reason)


def user_invitation_send(*, person_id: int) -> bool:
    """Mail an active person without a password the link to set their first one (the same
    link a password reset sends); False when there is nobody to invite."""
    person = User.objects.filter(pk=person_id, is_active=True, is_service_account=False).first()
    if person is None or person.has_usable_password() or not person.email:
        return False
    refusal = password_link_refusal(person)
    if refusal:
        logger.info("No invitation for %s: %s", person.username, refusal)
        return False
    uid = urlsafe_base64_encode(force_bytes(person.pk))
    link = settings.ARBITER_SITE_URL + reverse(
        "password_reset_confirm",
        kwargs={"uidb64": uid, "token": default_token_generator.make_token(person)},
    )
    with translation.override(person.language or settings.LANGUAGE_CODE):
        subject = _("Your Arbiter account: set your password")
        body = _(
            "Hello %(name)s,\n\nAn account on Arbiter was made for you (%(username)s). Set "
            "your password at this link (it works once, and for a limited time):\n\n"
            "%(link)s\n\nIf it has expired, ask for a new one from the sign-in page "
            "(“Forgot your password?”)."
        ) % {
            "name": person.get_full_name() or person.username,
            "username": person.username,
            "link": link,
        }
    send_mail(subject, body, None, [person.email])
    return True


@transaction.atomic
def user_site_role_withdraw(*, person: User, user: User, reason: str) -> User:
    """``person`` is a member again, at once: the identity provider's groups claim no longer
    lists the group of their site role. Only ever lowers a role (no approval needed to take
    power away; granting it is a rule change)."""
    person = User.objects.select_for_update().get(pk=person.pk)
    if person.site_role != SiteRole.MEMBER:
        person.site_role = SiteRole.MEMBER
        governed_save(person, user=user, reason=reason)
        # A role taken away: the tokens made with the old powers end (as user_access_update).
        revoked = user_tokens_revoke(owner=person, user=user, reason=reason)
        tokens_revoked_notify(person=person, count=revoked)
    return person
