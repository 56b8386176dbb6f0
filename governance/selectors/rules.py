"""Reads of the governed rules, shaped for pages and the API.

The scoped getters (``<kind>_get``) are the one place that decides whether a user may see
or edit an object; HTML views and API views both call them. Every signed-in, active user
may read every rule (the pool is shared, so its rules are public inside the organisation);
only ops may edit them.
"""

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.db import models
from django.db.models import Count, OuterRef, Prefetch, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.http import Http404
from django.utils.translation import gettext as _

from governance.models import (
    GpuFlavor,
    Membership,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PriorityTier,
    Project,
    ProjectRole,
    Quota,
    User,
)

M = TypeVar("M", bound=models.Model)


# --- access -------------------------------------------------------------------------------


def user_can_read_rules(user: Any) -> bool:
    return bool(user.is_authenticated and user.is_active)


def user_can_edit_rules(user: Any) -> bool:
    return bool(user_can_read_rules(user) and user.is_ops)


def signed_in_user(request: Any) -> User:
    """The user of a page or API request that sign-in let through; a 403 for anyone else.

    Views pass it to the services, which take a ``User``.
    """
    user = request.user
    if not isinstance(user, User) or not user_can_read_rules(user):
        raise PermissionDenied
    return user


def _scoped_get(queryset: QuerySet[M], *, user: Any, for_edit: bool, **lookup: Any) -> M:
    """404 when the object does not exist or the user may not see it; 403 to edit it."""
    if not user_can_read_rules(user):
        raise Http404
    try:
        obj = queryset.get(**lookup)
    except (ObjectDoesNotExist, ValueError, TypeError):
        raise Http404 from None
    if for_edit and not user_can_edit_rules(user):
        raise PermissionDenied(_("Only ops may change the rules."))
    return obj


def project_get(*, user: Any, slug: str, for_edit: bool = False) -> Project:
    return _scoped_get(
        Project.objects.select_related("tier"), user=user, for_edit=for_edit, slug=slug
    )


def flavor_get(*, user: Any, slug: str, for_edit: bool = False) -> GpuFlavor:
    return _scoped_get(GpuFlavor.objects.all(), user=user, for_edit=for_edit, slug=slug)


def pool_get(*, user: Any, slug: str, for_edit: bool = False) -> Pool:
    return _scoped_get(
        Pool.objects.select_related("parent"), user=user, for_edit=for_edit, slug=slug
    )


def tier_get(*, user: Any, slug: str, for_edit: bool = False) -> PriorityTier:
    return _scoped_get(
        PriorityTier.objects.select_related("owner", "aging_cap").prefetch_related(
            "preemptible_tiers"
        ),
        user=user,
        for_edit=for_edit,
        slug=slug,
    )


def preemption_class_get(*, user: Any, slug: str, for_edit: bool = False) -> PreemptionClass:
    return _scoped_get(
        PreemptionClass.objects.select_related("recovery_owner"),
        user=user,
        for_edit=for_edit,
        slug=slug,
    )


def quota_get(*, user: Any, pk: int | str, for_edit: bool = False) -> Quota:
    return _scoped_get(
        Quota.objects.select_related("project", "pool", "flavor", "preemption_class"),
        user=user,
        for_edit=for_edit,
        pk=pk,
    )


# --- lists --------------------------------------------------------------------------------


def project_list() -> QuerySet[Project]:
    leads = Membership.objects.filter(role=ProjectRole.LEAD).select_related("user")
    return (
        Project.objects.select_related("tier")
        .annotate(
            member_count=Count("memberships", distinct=True),
            guaranteed_gpus=Coalesce(
                Subquery(
                    Quota.objects.filter(project=OuterRef("pk"))
                    .values("project")
                    .annotate(total=Sum("guarantee"))
                    .values("total")
                ),
                0,
            ),
        )
        .prefetch_related(Prefetch("memberships", queryset=leads, to_attr="lead_memberships"))
        .order_by("name", "pk")
    )


def project_memberships(*, project: Project) -> QuerySet[Membership]:
    return project.memberships.select_related("user").order_by("role", "user__username")


def flavor_list() -> QuerySet[GpuFlavor]:
    return GpuFlavor.objects.annotate(total_gpus=Coalesce(Sum("capacities__gpus"), 0)).order_by(
        "name", "pk"
    )


def pool_list() -> QuerySet[Pool]:
    return (
        Pool.objects.select_related("parent")
        .prefetch_related(
            Prefetch("capacities", queryset=PoolCapacity.objects.select_related("flavor"))
        )
        .annotate(project_count=Count("quotas__project", distinct=True))
        .order_by("name", "pk")
    )


def tier_list() -> QuerySet[PriorityTier]:
    return (
        PriorityTier.objects.select_related("owner", "aging_cap")
        .prefetch_related("preemptible_tiers")
        .order_by("-score")
    )


def preemption_class_list() -> QuerySet[PreemptionClass]:
    return (
        PreemptionClass.objects.select_related("recovery_owner")
        .annotate(quota_count=Count("quotas"))
        .order_by("name", "pk")
    )


def quota_list() -> QuerySet[Quota]:
    return Quota.objects.select_related("project", "pool", "flavor", "preemption_class").order_by(
        "project__name", "pool__name", "flavor__name", "pk"
    )


# --- summaries for the home pages -----------------------------------------------------------


@dataclass(frozen=True)
class PoolFlavorUse:
    pool: Pool
    flavor: GpuFlavor
    capacity: int
    guaranteed: int
    child_capacity: int

    @property
    def committed(self) -> int:
        return self.guaranteed + self.child_capacity

    @property
    def free(self) -> int:
        return self.capacity - self.committed

    @property
    def committed_percent(self) -> int:
        return round(100 * self.committed / self.capacity) if self.capacity else 0


def pool_usage() -> list[PoolFlavorUse]:
    """Capacity against guarantees and child pools, per pool and flavor (three queries)."""
    capacities = list(
        PoolCapacity.objects.select_related("pool", "flavor").order_by("pool__name", "flavor__name")
    )
    guaranteed = {
        (row["pool"], row["flavor"]): row["total"]
        for row in Quota.objects.values("pool", "flavor").annotate(total=Sum("guarantee"))
    }
    children: dict[tuple[int, int], int] = {}
    for capacity in capacities:
        if capacity.pool.parent_id is not None:
            key = (capacity.pool.parent_id, capacity.flavor_id)
            children[key] = children.get(key, 0) + capacity.gpus
    return [
        PoolFlavorUse(
            pool=capacity.pool,
            flavor=capacity.flavor,
            capacity=capacity.gpus,
            guaranteed=guaranteed.get((capacity.pool_id, capacity.flavor_id), 0),
            child_capacity=children.get((capacity.pool_id, capacity.flavor_id), 0),
        )
        for capacity in capacities
    ]


def tiers_due_for_review(*, today: date, window_days: int | None = None) -> QuerySet[PriorityTier]:
    """Tiers whose review is overdue or due within the window (14 days by default)."""
    if window_days is None:
        window_days = settings.ARBITER_REVIEW_DUE_WINDOW_DAYS
    return (
        PriorityTier.objects.select_related("owner")
        .filter(next_review_on__lte=today + timedelta(days=window_days), retired_on__isnull=True)
        .order_by("next_review_on")
    )


def default_tier() -> PriorityTier | None:
    return PriorityTier.objects.filter(is_default=True).first()


def user_memberships(*, user: User) -> QuerySet[Membership]:
    return (
        Membership.objects.filter(user=user)
        .select_related("project", "project__tier")
        .order_by("project__name")
    )


def quotas_for_projects(*, project_ids: list[int]) -> QuerySet[Quota]:
    return quota_list().filter(project_id__in=project_ids)


def search_filter(queryset: QuerySet[M], *, query: str, fields: list[str]) -> QuerySet[M]:
    if not query:
        return queryset
    condition = Q()
    for field in fields:
        condition |= Q(**{f"{field}__icontains": query})
    return queryset.filter(condition)
