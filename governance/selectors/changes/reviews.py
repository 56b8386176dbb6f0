"""The quota reviews that are due, and who is reminded of them."""

import datetime as dt
from collections.abc import Sequence

from django.conf import settings
from django.db.models import QuerySet

from governance.models import Membership, ProjectRole, Quota, User


def quotas_due_for_review(*, today: dt.date, window_days: int | None = None) -> QuerySet[Quota]:
    """Quotas whose review is overdue or due within the window (14 days by default)."""
    if window_days is None:
        window_days = settings.ARBITER_REVIEW_DUE_WINDOW_DAYS
    return (
        Quota.objects.select_related("project", "pool", "flavor")
        .filter(next_review_on__lte=today + dt.timedelta(days=window_days))
        .order_by("next_review_on", "pk")
    )


def quota_review_recipients(*, quotas: Sequence[Quota]) -> dict[int, list[User]]:
    """The leads of each quota's project (one query)."""
    leads: dict[int, list[User]] = {}
    for membership in (
        Membership.objects.filter(
            project__in={quota.project_id for quota in quotas}, role=ProjectRole.LEAD
        )
        .select_related("user")
        .order_by("user__username")
    ):
        leads.setdefault(membership.project_id, []).append(membership.user)
    return {quota.pk: leads.get(quota.project_id, []) for quota in quotas}
