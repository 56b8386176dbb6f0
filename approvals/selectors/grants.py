"""Grants, notifications and the rule changes a user may decide."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery
from django.http import Http404
from django.utils.translation import gettext_lazy

from approvals.models import (
    Notification,
    UpgradeRequest,
    grant_summary,
)
from governance.models import (
    ChangeStatus,
    Grant,
    GrantState,
    Project,
    RuleChange,
    grant_in_force_q,
)
from governance.selectors import (
    Sorts,
    approval_problem,
    rule_change_list,
    sorted_by,
    user_can_read_rules,
)

from .requests import EXPIRY_WARNING


@dataclass(frozen=True)
class ProjectGrant:
    grant: Grant
    request: UpgradeRequest | None
    in_force: bool
    ends_soon: bool

    @property
    def summary(self) -> str:
        return grant_summary(self.grant)


def project_grants(*, project: Project, at: datetime) -> list[ProjectGrant]:
    """The project's grants in force at ``at`` or still to start, by end (two queries)."""
    grants = (
        Grant.objects.filter(project=project, ends_at__gt=at)
        .exclude(state__in=[GrantState.REVOKED, GrantState.EXPIRED])
        .select_related("project", "tier", "pool", "flavor", "preemption_class")
        .order_by("ends_at", "pk")
    )
    requests = {
        request.grant_id: request
        for request in UpgradeRequest.objects.filter(grant__in=grants).select_related("requester")
    }
    return [
        ProjectGrant(
            grant=grant,
            request=requests.get(grant.pk),
            in_force=grant.is_active_at(at),
            ends_soon=grant.ends_at - at <= EXPIRY_WARNING,
        )
        for grant in grants
    ]


GRANT_SORTS: Sorts = {
    "-starts_at": (gettext_lazy("Newest first"), ("-starts_at", "-pk")),
    "ends_at": (gettext_lazy("Ending first"), ("ends_at", "pk")),
}


def _grant_queryset() -> QuerySet[Grant]:
    return Grant.objects.select_related(
        "project", "tier", "pool", "flavor", "preemption_class"
    ).annotate(
        request_id=Subquery(UpgradeRequest.objects.filter(grant=OuterRef("pk")).values("pk")[:1])
    )


def grant_list(
    *,
    user: Any,
    project: Project | None = None,
    at: datetime | None = None,
    kind: str | None = None,
    state: str | None = None,
    sort: str | None = None,
) -> QuerySet[Grant]:
    """Grants (rules, readable by everyone who reads the rules), newest first; with ``at``
    only those in force at that instant (started, not ended, not revoked by then)."""
    if not user_can_read_rules(user):
        return Grant.objects.none()
    grants = _grant_queryset()
    if project is not None:
        grants = grants.filter(project=project)
    if at is not None:
        grants = grants.filter(grant_in_force_q(at))
    if kind:
        grants = grants.filter(kind=kind)
    if state:
        grants = grants.filter(state=state)
    return sorted_by(grants, sort=sort, sorts=GRANT_SORTS)


def grant_get(*, user: Any, pk: int | str) -> Grant:
    """One grant; 404 when missing or the user reads no rules."""
    if not user_can_read_rules(user):
        raise Http404
    try:
        return _grant_queryset().get(pk=pk)
    except (Grant.DoesNotExist, ValueError, TypeError):
        raise Http404 from None


# --- notifications --------------------------------------------------------------------------


def notification_list(*, user: Any) -> QuerySet[Notification]:
    return Notification.objects.filter(user=user).order_by("-created_at", "-pk")


def unread_count(*, user: Any) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).count()


# Proposed rule changes the inbox shows at most (the change list has the rest).
INBOX_CHANGES = 25


def rule_changes_to_decide(*, user: Any) -> list[RuleChange]:
    """The proposed rule changes ``user`` may approve, the oldest first: the inbox lists them
    next to the requests, each with its what-if replay."""
    if not (getattr(user, "is_ops", False) or getattr(user, "is_approver", False)):
        return []
    proposed = rule_change_list(status=ChangeStatus.PROPOSED, sort="created_at")[:INBOX_CHANGES]
    return [change for change in proposed if approval_problem(change=change, user=user) is None]
