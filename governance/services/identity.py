"""Signing in through the organisation's identity provider (OpenID Connect).

``identity_sign_in`` takes the claims of a verified ID token (and the userinfo answer) and
returns the person: matched by issuer and subject, created on the first sign-in as an active
member with no password and no power, their name, e-mail and language kept up to date.

The directory's groups then decide:

- the memberships of the projects that ``ARBITER_OIDC_PROJECT_GROUPS`` names, added,
  changed and removed through the membership service and signed in the history by Arbiter's
  own account, with the issuer, the claim and the group in the reason;
- nothing about site roles and tier ownership beyond a proposal: a group of
  ``ARBITER_OIDC_ROLE_GROUPS`` proposes a rule change (authored by the person, approved by
  someone else as every change is). Leaving a site role's group takes the role away at once.

``identity_recheck`` asks the provider (a refresh-token grant) whether the account still
exists; when it does not, ``identity_disable`` marks the identity disabled, revokes the
person's API tokens and ends their sessions (whatever their password), writes the person's
history and mails them and ops. ``identities_recheck_due`` (beat, every minute) asks about
everyone who still holds something, so that this happens within the recheck interval.
"""

import base64
import hashlib
import logging
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop, ngettext

from governance.models import (
    OPEN_STATUSES,
    PriorityTier,
    Project,
    ProjectRole,
    ProviderIdentity,
    RuleEdit,
    SiteRole,
    User,
)
from governance.models.texts import mail_language

from ._access import directory_proposal
from ._history import governed_save
from .changes import EditSpec, rule_change_create
from .grants import system_user
from .people import user_site_role_withdraw
from .projects import membership_directory_apply
from .tokens import user_tokens_revoke

logger = logging.getLogger("arbiter.identity")

USERNAME_MAX_LENGTH = 150


@dataclass
class IdentityRefused(Exception):
    """Why a sign-in through the provider is refused: ``code`` names the case (the page's
    message), ``detail`` what the log records, ``params`` the message's values."""

    code: str
    detail: str = ""
    params: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}" if self.detail else self.code


# --- the stored refresh token ----------------------------------------------------------------


def _fernet() -> Fernet:
    digest = hashlib.sha256(f"arbiter-oidc-refresh:{settings.SECRET_KEY}".encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def refresh_token_seal(value: str) -> str:
    return _fernet().encrypt(value.encode()).decode() if value else ""


def refresh_token_open(value: str) -> str:
    if not value:
        return ""
    try:
        return _fernet().decrypt(value.encode()).decode()
    except InvalidToken:
        # Sealed with another secret key: as if there were none.
        return ""


# --- claims ----------------------------------------------------------------------------------


def _text_claim(claims: Mapping[str, Any], name: str, *, required: bool = False) -> str:
    value = claims.get(name) if name else None
    if value is None or value == "":
        if required:
            raise IdentityRefused("claim", f"claim {name!r} missing", {"claim": name})
        return ""
    if not isinstance(value, str):
        raise IdentityRefused("claim", f"claim {name!r} is not a string", {"claim": name})
    return value.strip()


def claimed_groups(claims: Mapping[str, Any]) -> list[str] | None:
    """The groups claim as a sorted list; ``None`` when groups are not used. A configured
    claim that is missing or not a list of strings refuses the sign-in: "in no group" must
    be said (an empty list), never guessed."""
    name = settings.ARBITER_OIDC_GROUPS_CLAIM
    if not name:
        return None
    value = claims.get(name)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise IdentityRefused("claim", f"claim {name!r} missing or not a list", {"claim": name})
    return sorted(set(value))


def language_from_locale(locale: str) -> str:
    """A provider's locale (BCP 47: ``zh-CN``, ``en-GB``) as one of the site's languages, or
    empty when none fits."""
    tag = locale.strip().lower().replace("_", "-")
    if not tag:
        return ""
    codes = [code for code, _name in settings.LANGUAGES]
    if tag in codes:
        return tag
    base = tag.split("-")[0]
    if base == "zh" and "zh-hans" in codes and not any(t in tag for t in ("hant", "tw", "hk")):
        return "zh-hans"
    return base if base in codes else ""


def _username_for(claims: Mapping[str, Any], *, issuer: str, subject: str) -> str:
    """The new account's username: the username claim (or the e-mail's local part),
    NFKC-normalised, made unique with a short digest of the subject when an account already
    has it in any case."""
    wanted = _text_claim(claims, settings.ARBITER_OIDC_USERNAME_CLAIM)
    if not wanted:
        wanted = _text_claim(claims, settings.ARBITER_OIDC_EMAIL_CLAIM).split("@")[0]
    # NFKC first (a full-width "Ｏｐｓ" is "Ops"), then unique whatever the case (``Ops``
    # beside ``ops`` would read as one person): the User model's constraint.
    wanted = unicodedata.normalize("NFKC", wanted)
    wanted = "".join(ch for ch in wanted if ch.isalnum() or ch in "@.+-_")[:100] or "person"
    if not User.objects.filter(username__iexact=wanted).exists():
        return wanted
    digest = hashlib.sha256(f"{issuer}\n{subject}".encode()).hexdigest()[:8]
    return f"{wanted}-{digest}"[:USERNAME_MAX_LENGTH]


def _provider_reason(issuer: str, text: str, **values: str) -> str:
    values = {"issuer": issuer, "claim": settings.ARBITER_OIDC_GROUPS_CLAIM, **values}
    return ("Identity provider %(issuer)s: " + text) % values


# --- sign-in ---------------------------------------------------------------------------------


@transaction.atomic
def identity_sign_in(*, issuer: str, claims: Mapping[str, Any], refresh_token: str = "") -> User:
    """The person the verified ``claims`` name, created or updated; their memberships and
    site roles follow the groups claim. Raises ``IdentityRefused`` and writes nothing when a
    claim is missing or the account is deactivated in Arbiter."""
    subject = _text_claim(claims, "sub", required=True)
    groups = claimed_groups(claims)
    email = _text_claim(claims, settings.ARBITER_OIDC_EMAIL_CLAIM)
    first_name = _text_claim(claims, settings.ARBITER_OIDC_GIVEN_NAME_CLAIM)[:150]
    last_name = _text_claim(claims, settings.ARBITER_OIDC_FAMILY_NAME_CLAIM)[:150]
    language = language_from_locale(_text_claim(claims, settings.ARBITER_OIDC_LOCALE_CLAIM))
    now = timezone.now()

    identity = (
        ProviderIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=issuer, subject=subject)
        .first()
    )
    if identity is None:
        person = User(
            username=_username_for(claims, issuer=issuer, subject=subject),
            email=email,
            first_name=first_name,
            last_name=last_name,
            language=language,
            site_role=SiteRole.MEMBER,
            is_active=True,
            is_staff=False,
            is_superuser=False,
        )
        person.set_unusable_password()
        governed_save(
            person,
            user=system_user(),
            reason=_provider_reason(
                issuer, "first sign-in of subject %(subject)s", subject=subject
            ),
        )
        identity = ProviderIdentity(user=person, issuer=issuer, subject=subject)
    else:
        person = User.objects.select_for_update().get(pk=identity.user_id)
        if person.is_service_account or not person.is_active:
            raise IdentityRefused("inactive", f"account {person.username} is deactivated")
        fresh = {
            "email": email,
            "first_name": first_name,
            "last_name": last_name,
            "language": language,
        }
        changed = [
            name for name, value in fresh.items() if value and getattr(person, name) != value
        ]
        for name in changed:
            setattr(person, name, fresh[name])
        if changed:
            governed_save(
                person,
                user=system_user(),
                reason=_provider_reason(
                    issuer, "updated %(fields)s at sign-in", fields=", ".join(changed)
                ),
            )
    identity.refresh_token = refresh_token_seal(refresh_token)
    identity.last_sign_in_at = now
    identity.checked_at = now
    identity.disabled_at = None
    if groups is not None:
        identity.groups = groups
        _memberships_follow(person, issuer=issuer, groups=groups)
        identity.claimed = _powers_follow(person, identity=identity, issuer=issuer, groups=groups)
    identity.full_clean(exclude=["user"])
    identity.save()
    logger.info(
        "Signed in through %s: subject %s is %s (groups %s)", issuer, subject, person, groups
    )
    return person


def _memberships_follow(person: User, *, issuer: str, groups: list[str]) -> None:
    """The projects the mapping names: the person is a member (or lead) exactly when a group
    of theirs maps to the project."""
    wanted: dict[str, tuple[str | None, str]] = {}  # slug → (role, group)
    managed: set[str] = set()
    for group, targets in settings.ARBITER_OIDC_PROJECT_GROUPS.items():
        for target in targets:
            slug, _sep, role = target.partition(":")
            role = role or ProjectRole.MEMBER
            managed.add(slug)
            if group in groups and (slug not in wanted or role == ProjectRole.LEAD):
                wanted[slug] = (role, group)
    projects = Project.objects.in_bulk(managed, field_name="slug")
    for slug in sorted(managed - set(projects)):
        logger.warning("ARBITER_OIDC_PROJECT_GROUPS names the unknown project %r", slug)
    actor = system_user()
    for slug, project in sorted(projects.items()):
        wanted_role, group = wanted.get(slug, (None, ""))
        if wanted_role is not None:
            reason = _provider_reason(
                issuer,
                "claim “%(claim)s” lists “%(group)s”: %(person)s is %(role)s of %(project)s",
                group=group,
                person=person.username,
                role=wanted_role,
                project=slug,
            )
        else:
            reason = _provider_reason(
                issuer,
                "claim “%(claim)s” lists no group of %(project)s: %(person)s leaves it",
                person=person.username,
                project=slug,
            )
        membership_directory_apply(
            project=project, member=person, role=wanted_role, user=actor, reason=reason
        )


def _role_groups() -> dict[str, list[str]]:
    """What each group asks for ("role:ops", "tier:gold") from ARBITER_OIDC_ROLE_GROUPS."""
    result: dict[str, list[str]] = {}
    for group, targets in settings.ARBITER_OIDC_ROLE_GROUPS.items():
        for target in targets:
            power = target if target.startswith("tier:") else f"role:{target}"
            result.setdefault(group, []).append(power)
    return result


def _powers_follow(
    person: User, *, identity: ProviderIdentity, issuer: str, groups: list[str]
) -> list[str]:
    """Propose what the groups ask for and the person lacks; withdraw at once a mapped site
    role whose group the person left. Returns the powers claimed now."""
    by_group = _role_groups()
    claimed: dict[str, str] = {}  # power → group
    for group in groups:
        for power in by_group.get(group, ()):
            claimed.setdefault(power, group)
    mapped_roles = {power.removeprefix("role:") for powers in by_group.values() for power in powers}
    if person.site_role in mapped_roles and f"role:{person.site_role}" not in claimed:
        user_site_role_withdraw(
            person=person,
            user=system_user(),
            reason=_provider_reason(
                issuer,
                "claim “%(claim)s” no longer lists a group of the %(role)s role: %(person)s "
                "loses it",
                role=person.site_role,
                person=person.username,
            ),
        )
        person.refresh_from_db()
    before = set(identity.claimed or [])
    for power, group in sorted(claimed.items()):
        if power in before:
            continue  # proposed when the claim appeared; not again at every sign-in
        _power_propose(person, power=power, group=group, issuer=issuer)
    return sorted(claimed)


def _power_propose(person: User, *, power: str, group: str, issuer: str) -> None:
    kind, _sep, name = power.partition(":")
    if kind == "role":
        if name not in SiteRole.values or name == SiteRole.MEMBER:
            logger.warning("ARBITER_OIDC_ROLE_GROUPS names the unknown site role %r", name)
            return
        if person.site_role == name:
            return
        edit = EditSpec(target=person, field="site_role", value=name)
    else:
        tier = PriorityTier.objects.filter(slug=name).first()
        if tier is None:
            logger.warning("ARBITER_OIDC_ROLE_GROUPS names the unknown tier %r", name)
            return
        if tier.owner_id == person.pk:
            return
        edit = EditSpec(target=tier, field="owner", value=person)
    if _open_proposal_exists(edit):
        return
    reason = _provider_reason(
        issuer,
        "claim “%(claim)s” lists “%(group)s”, which asks for %(power)s for %(person)s. "
        "A claim never grants it: approve this change to do so.",
        group=group,
        power=power,
        person=person.username,
    )
    try:
        with transaction.atomic(), directory_proposal():
            change = rule_change_create(
                user=person,
                reason=reason,
                edits=[edit],
                confirmation_reason=gettext_noop(
                    "Proposed by the identity provider's groups claim at sign-in."
                ),
            )
    except ValidationError as error:
        logger.warning("Could not propose %s for %s: %s", power, person, error)
        return
    logger.info("Proposed change #%s: %s for %s (group %s)", change.pk, power, person, group)


def _open_proposal_exists(edit: EditSpec) -> bool:
    content_type = ContentType.objects.get_for_model(type(edit.target))
    value = edit.value.pk if isinstance(edit.value, User) else edit.value
    return RuleEdit.objects.filter(
        change__status__in=OPEN_STATUSES,
        content_type=content_type,
        object_id=edit.target.pk,
        field=edit.field,
        new_value=value,
    ).exists()


# --- is the account still there? -------------------------------------------------------------


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
