"""Grants: time-boxed changes of the effective rules, created from approved requests.

``approvals`` calls these services; governance never imports ``approvals``. The beat task
``grants_transition`` marks grants active and expired as their windows open and close;
each transition records a rules revision, which queues the scheduler sync.
"""

from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from governance.models import (
    Grant,
    GrantKind,
    GrantState,
    Project,
    Quota,
    RevisionTrigger,
    SiteRole,
    Terms,
    User,
)

from ._history import governed_save
from .revisions import rules_revision_create

SYSTEM_USERNAME = "arbiter"


def system_user() -> User:
    """The account that signs what Arbiter does on its own (expiry, activation)."""
    user = User.objects.filter(username=SYSTEM_USERNAME).first()
    if user is None:
        user = User(username=SYSTEM_USERNAME, first_name="Arbiter", site_role=SiteRole.MEMBER)
        user.set_unusable_password()
        user.save()
    return user


@transaction.atomic
def grant_create(
    *,
    user: User,
    reason: str,
    project: Project,
    terms: Terms,
    source: str = "",
    now: datetime | None = None,
) -> Grant:
    """Create a grant with ``terms``; it is active at once when its window has already opened."""
    now = now or timezone.now()
    grant = Grant(**terms.fields(), project=project, source=source)
    if grant.ends_at <= now:
        raise ValidationError({"ends_at": _("This grant would already have ended.")})
    if (
        grant.kind == GrantKind.QUOTA_EXCEPTION
        and not Quota.objects.filter(project=project, pool=grant.pool, flavor=grant.flavor).exists()
    ):
        raise ValidationError(
            {"pool": _("The project has no quota of that flavor in that pool to raise.")}
        )
    if grant.starts_at <= now:
        grant.state = GrantState.ACTIVE
    governed_save(grant, user=user, reason=reason)
    if grant.state == GrantState.ACTIVE:
        rules_revision_create(trigger=RevisionTrigger.GRANT_STARTED, note=str(grant), user=user)
    return grant


@transaction.atomic
def grant_revoke(*, grant: Grant, user: User, reason: str, now: datetime | None = None) -> Grant:
    now = now or timezone.now()
    grant = Grant.objects.select_for_update().get(pk=grant.pk)
    if grant.state in (GrantState.EXPIRED, GrantState.REVOKED):
        raise ValidationError(
            _("This grant is already %(state)s.") % {"state": grant.get_state_display()}
        )
    was_active = grant.state == GrantState.ACTIVE
    grant.state = GrantState.REVOKED
    grant.revoked_at = now
    governed_save(grant, user=user, reason=reason)
    if was_active:
        rules_revision_create(trigger=RevisionTrigger.GRANT_ENDED, note=str(grant), user=user)
    return grant


@transaction.atomic
def grants_transition(*, now: datetime | None = None) -> list[Grant]:
    """Activate grants whose window opened and expire those whose window closed.

    Idempotent: a grant moves once; a second run at the same instant changes nothing.
    Returns the grants that changed state.
    """
    now = now or timezone.now()
    actor = system_user()
    changed: list[Grant] = []
    due = (
        Grant.objects.select_for_update()
        .filter(state__in=[GrantState.SCHEDULED, GrantState.ACTIVE])
        .filter(starts_at__lte=now)
    )
    for grant in due.order_by("pk"):
        if grant.ends_at <= now:
            grant.state = GrantState.EXPIRED
            governed_save(grant, user=actor, reason=gettext_noop("The grant's time box ended."))
            trigger = RevisionTrigger.GRANT_ENDED
            changed.append(grant)
        elif grant.state == GrantState.SCHEDULED:
            grant.state = GrantState.ACTIVE
            governed_save(grant, user=actor, reason=gettext_noop("The grant's time box began."))
            trigger = RevisionTrigger.GRANT_STARTED
            changed.append(grant)
        else:
            continue
        rules_revision_create(trigger=trigger, note=str(grant), user=actor)
    return changed
