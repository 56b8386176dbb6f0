"""``identity_sign_in``: the person the claims name, their memberships and the site roles their
directory groups propose (see the package's docstring)."""

import logging
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

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

from .._access import directory_proposal
from .._history import governed_save
from ..changes import EditSpec, rule_change_create
from ..grants import system_user
from ..people import user_site_role_withdraw
from ..projects import membership_directory_apply
from .claims import (
    IdentityRefused,
    _provider_reason,
    _text_claim,
    _username_for,
    claimed_groups,
    language_from_locale,
    refresh_token_seal,
)

logger = logging.getLogger("arbiter.identity")


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
