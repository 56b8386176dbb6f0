from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from governance.models import Membership, PriorityTier, Project, ProjectRole, ServiceAccount, User

from ._access import require_ops
from ._history import apply_fields, governed_delete, governed_save
from .people import tokens_revoked_notify
from .tokens import user_tokens_revoke

PROJECT_EDITABLE = ("name", "description", "tier")


@transaction.atomic
def project_create(
    *,
    user: User,
    reason: str,
    slug: str,
    name: str,
    description: str = "",
    tier: PriorityTier | None = None,
) -> Project:
    require_ops(user)
    project = Project(slug=slug, name=name, description=description, tier=tier)
    governed_save(project, user=user, reason=reason)
    return project


@transaction.atomic
def project_update(*, project: Project, user: User, reason: str, data: dict[str, Any]) -> Project:
    require_ops(user)
    project = Project.objects.select_for_update().get(pk=project.pk)
    if apply_fields(project, data, PROJECT_EDITABLE):
        governed_save(project, user=user, reason=reason)
    return project


@transaction.atomic
def membership_set(
    *, project: Project, member: User, role: str, user: User, reason: str
) -> Membership:
    """Add ``member`` to ``project`` with ``role``, or change the role they have."""
    require_ops(user)
    if member.is_service_account:
        _require_own_project_member(project=project, member=member, role=role)
    return _membership_write(project=project, member=member, role=role, user=user, reason=reason)


def _membership_write(
    *, project: Project, member: User, role: str, user: User, reason: str
) -> Membership:
    membership = Membership.objects.select_for_update().filter(project=project, user=member).first()
    if membership is None:
        membership = Membership(project=project, user=member, role=role)
    elif membership.role == role:
        return membership
    demoted = membership.pk is not None and membership.role == ProjectRole.LEAD
    membership.role = ProjectRole(role)
    governed_save(membership, user=user, reason=reason)
    if demoted:
        _role_removed(member, user=user)
    return membership


def _role_removed(member: User, *, user: User) -> None:
    """A lead's role is removed: the person's tokens end (made while they led)."""
    revoked = user_tokens_revoke(
        owner=member,
        user=user,
        reason=gettext_noop("A project role removed: every token revoked"),
    )
    tokens_revoked_notify(person=member, count=revoked)


@transaction.atomic
def membership_directory_apply(
    *, project: Project, member: User, role: str | None, user: User, reason: str
) -> Membership | None:
    """The directory's answer for ``member`` in ``project``: ``role``, or not a member
    (``None``). Called at sign-in through the identity provider (``services.identity``), for
    the projects whose membership the directory decides; ``user`` is Arbiter's own account
    and ``reason`` names the issuer, the claim and the group."""
    if member.is_service_account:
        return None
    if role is not None:
        return _membership_write(
            project=project, member=member, role=role, user=user, reason=reason
        )
    membership = Membership.objects.select_for_update().filter(project=project, user=member).first()
    if membership is not None:
        governed_delete(membership, user=user, reason=reason)
        _role_removed(member, user=user)
    return None


def _require_own_project_member(*, project: Project, member: User, role: str) -> None:
    """A service account is a plain member of its own project, never anything more."""
    account = ServiceAccount.objects.filter(user=member).first()
    if account is None or account.project_id != project.pk or role != ProjectRole.MEMBER:
        raise ValidationError(
            {
                "role": _(
                    "A service account is a member of its own project only; it cannot be a "
                    "lead or join another project."
                )
            }
        )


@transaction.atomic
def membership_remove(*, membership: Membership, user: User, reason: str) -> None:
    require_ops(user)
    member = membership.user
    governed_delete(membership, user=user, reason=reason)
    if not member.is_service_account:
        _role_removed(member, user=user)
