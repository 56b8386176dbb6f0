"""Is the account still there? ``identity_recheck`` asks the provider, ``identity_disable`` acts on
its no, ``identity_disabled_notify`` mails the person and ops, ``identities_recheck_due`` (beat)
asks about everyone due."""

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from governance.models import (
    ProviderIdentity,
    SiteRole,
    User,
)
from governance.models.texts import mail_language

from .._history import governed_save
from ..grants import system_user
from ..tokens import user_tokens_revoke
from .claims import (
    IdentityRefused,
    _provider_reason,
    claimed_groups,
    refresh_token_open,
    refresh_token_seal,
)
from .sign_in import _memberships_follow, _powers_follow

logger = logging.getLogger("arbiter.identity")


class ProviderSaysNo(Exception):
    """The provider refused the refresh token: the account is gone or disabled (or the grant
    was revoked there)."""


class ProviderSilent(Exception):
    """The provider did not answer (down, or an answer that is not OAuth's)."""


@transaction.atomic
def identity_recheck(
    *,
    identity: ProviderIdentity,
    redeem: Callable[[str], tuple[str, Mapping[str, Any] | None]],
    min_age_seconds: float,
) -> bool:
    """Ask the provider whether the account still exists, unless it confirmed it less than
    ``min_age_seconds`` ago; ``True`` when it is gone or disabled (then recorded by
    ``identity_disable``). ``redeem`` redeems a refresh token and returns the new one (or
    empty) and the verified claims of the new ID token (or ``None``), raising
    ``ProviderSaysNo`` or ``ProviderSilent``. When those claims carry the groups claim, the
    memberships and site roles follow it as at a sign-in (a role whose group was left goes
    now, not at the next sign-in). The row stays locked while the provider is asked, so
    that two requests never redeem the same (rotating) token."""
    identity = ProviderIdentity.objects.select_for_update().get(pk=identity.pk)
    if identity.disabled_at is not None:
        return True
    now = timezone.now()
    if identity.checked_at and (now - identity.checked_at).total_seconds() < min_age_seconds:
        return False
    refresh_token = refresh_token_open(identity.refresh_token)
    if not refresh_token:
        # The provider issued none: nothing to ask it with. The account's end shows only
        # when the provider refuses the next sign-in.
        logger.info("No refresh token for %s: the provider cannot be asked", identity)
        return False
    try:
        renewed, claims = redeem(refresh_token)
    except ProviderSaysNo as error:
        identity_disable(identity=identity, detail=str(error))
        return True
    except ProviderSilent as error:
        # An outage must not lock out every pipeline: accepted, asked again at the next use.
        logger.warning("Identity provider unreachable (%s); the account is taken as it was", error)
        return False
    identity.checked_at = now
    if renewed:
        identity.refresh_token = refresh_token_seal(renewed)
    groups = None
    if claims is not None and claims.get("sub") == identity.subject:
        try:
            groups = claimed_groups(claims)
        except IdentityRefused:
            groups = None  # a refreshed ID token may omit the groups: the last sign-in's stay
    if groups is not None:
        person = User.objects.select_for_update().get(pk=identity.user_id)
        identity.groups = groups
        _memberships_follow(person, issuer=identity.issuer, groups=groups)
        identity.claimed = _powers_follow(
            person, identity=identity, issuer=identity.issuer, groups=groups
        )
    identity.save(update_fields=["checked_at", "refresh_token", "groups", "claimed"])
    return False


@transaction.atomic
def identity_disable(*, identity: ProviderIdentity, detail: str) -> None:
    """The provider says the account is gone or disabled: its sessions end (the backends no
    longer load it, whatever its password), its API tokens are revoked (each with a history
    row), the person's own history says why, and the person and ops hear of it by mail."""
    identity = ProviderIdentity.objects.select_for_update().get(pk=identity.pk)
    now = timezone.now()
    newly = identity.disabled_at is None
    if newly:
        identity.disabled_at = now
    identity.refresh_token = ""
    identity.save(update_fields=["disabled_at", "refresh_token"])
    actor = system_user()
    reason = _provider_reason(
        identity.issuer, "the account is gone or disabled (%(detail)s)", detail=detail
    )
    revoked = user_tokens_revoke(owner=identity.user, user=actor, reason=reason)
    if newly:
        person = User.objects.select_for_update().get(pk=identity.user_id)
        governed_save(
            person,
            user=actor,
            reason=_provider_reason(
                identity.issuer,
                "the account is gone or disabled (%(detail)s): its sessions end and "
                "%(count)s API token(s) were revoked",
                detail=detail,
                count=str(revoked),
            ),
        )
        person_id, count = person.pk, revoked
        transaction.on_commit(lambda: identity_disabled_notify(person_id=person_id, count=count))
    logger.warning(
        "Identity provider %s: subject %s (%s) is gone or disabled (%s); %d API token(s) revoked",
        identity.issuer,
        identity.subject,
        identity.user_id,
        detail,
        revoked,
    )


def identity_disabled_notify(*, person_id: int, count: int) -> int:
    """Mail the person whose account the provider disabled, and every active ops person,
    that Arbiter ended their access (``count`` tokens revoked): how many mails were sent."""
    person = User.objects.get(pk=person_id)
    values = {"username": person.username, "name": person.get_full_name() or person.username}
    sent = 0
    if person.email:
        with translation.override(mail_language(person)):
            subject = _("Your Arbiter access ended: the identity provider disabled your account")
            body = ngettext(
                "The identity provider says your account (%(username)s) is gone or disabled, "
                "so Arbiter ended your sessions and revoked the %(count)d API token you held.",
                "The identity provider says your account (%(username)s) is gone or disabled, "
                "so Arbiter ended your sessions and revoked the %(count)d API tokens you held.",
                count,
            ) % {**values, "count": count}
        send_mail(subject, body, None, [person.email])
        sent += 1
    ops = User.objects.filter(
        site_role=SiteRole.OPS, is_active=True, is_service_account=False
    ).exclude(email="")
    for operator in ops.exclude(pk=person.pk).order_by("pk"):
        with translation.override(mail_language(operator)):
            subject = (
                _("Arbiter: %(name)s lost access (disabled at the identity provider)") % values
            )
            body = ngettext(
                "The identity provider says the account of %(name)s (%(username)s) is gone or "
                "disabled. Arbiter ended their sessions and revoked %(count)d API token; the "
                "person's history records it.",
                "The identity provider says the account of %(name)s (%(username)s) is gone or "
                "disabled. Arbiter ended their sessions and revoked %(count)d API tokens; the "
                "person's history records it.",
                count,
            ) % {**values, "count": count}
        send_mail(subject, body, None, [operator.email])
        sent += 1
    return sent


def identities_recheck_due(
    *,
    now: datetime,
    redeem: Callable[[str], tuple[str, Mapping[str, Any] | None]],
    every_seconds: float,
) -> list[int]:
    """Ask the provider about every identity that still holds something here (a live API
    token, or a sign-in recent enough for a live session) and that it has not confirmed for
    ``every_seconds``: the ids of those it disabled now. Run by beat every minute, so that a
    person disabled at the provider loses their tokens within the recheck interval even if
    they never use them again."""
    session_start = now - timedelta(seconds=settings.SESSION_COOKIE_AGE)
    holding = Q(user__api_tokens__revoked_at=None, user__api_tokens__expires_at__gt=now) | Q(
        last_sign_in_at__gt=session_start
    )
    due = (
        ProviderIdentity.objects.filter(
            holding,
            disabled_at=None,
            user__is_active=True,
            issuer=settings.ARBITER_OIDC_ISSUER,
        )
        .exclude(refresh_token="")
        .filter(Q(checked_at=None) | Q(checked_at__lte=now - timedelta(seconds=every_seconds)))
        .values_list("pk", flat=True)
        .distinct()
        .order_by("pk")
    )
    disabled = []
    for identity_id in list(due):
        identity = ProviderIdentity.objects.get(pk=identity_id)
        if identity_recheck(identity=identity, redeem=redeem, min_age_seconds=every_seconds):
            disabled.append(identity_id)
    return disabled
