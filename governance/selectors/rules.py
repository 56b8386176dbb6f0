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
from django.db.models import Count, F, OuterRef, Prefetch, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce, Concat, NullIf, Trim
from django.http import Http404
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

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

from .lists import JoinedNames, KeysFirstQuerySet, Sorts, search_filter, sorted_by

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
# Each list selector takes its filters and ``sort`` as keywords; pages and the API pass the
# same parameters (see ``lists.py``). The queries are a fixed number whatever the rows.

PROJECT_SORTS: Sorts = {
    "name": (gettext_lazy("Name"), ("name", "pk")),
    "-name": (gettext_lazy("Name, Z to A"), ("-name", "-pk")),
    "slug": (gettext_lazy("Slug"), ("slug",)),
    "-guaranteed_gpus": (gettext_lazy("Most guaranteed GPUs"), ("-guaranteed_gpus", "name", "pk")),
}


def _lead_names(*, display: bool) -> JoinedNames:
    """A project's leads by username: their usernames, or how a page names each person
    (``str(user)``: the full name, else the username)."""
    full_name = Trim(Concat("user__first_name", Value(" "), "user__last_name"))
    name = Coalesce(NullIf(full_name, Value("")), "user__username") if display else None
    return JoinedNames(
        Membership.objects.filter(project=OuterRef("pk"), role=ProjectRole.LEAD)
        .order_by("user__username")
        .values(name=name or F("user__username"), sort_key=F("user__username"))
    )


def project_list(
    *,
    tier: PriorityTier | None = None,
    member: User | None = None,
    q: str | None = None,
    sort: str | None = None,
) -> QuerySet[Project]:
    """Projects with their tier (``tier_slug``, ``tier_name``), leads (``lead_names`` as a
    page names them, ``lead_usernames`` for the API; each joined by ``JoinedNames``), member
    count and guaranteed GPUs, in one query."""
    # The tier's slug and name rather than its row: a few tiers, one object per project.
    projects = Project.objects.annotate(tier_slug=F("tier__slug"), tier_name=F("tier__name"))
    if tier is not None:
        projects = projects.filter(tier=tier)
    if member is not None:
        projects = projects.filter(memberships__user=member)
    projects = search_filter(projects, query=q, fields=["slug", "name", "description"])
    projects = projects.annotate(
        member_count=Coalesce(
            Subquery(
                Membership.objects.filter(project=OuterRef("pk"))
                .order_by()
                .values("project")
                .annotate(total=Count("*"))
                .values("total")
            ),
            0,
        ),
        guaranteed_gpus=Coalesce(
            Subquery(
                Quota.objects.filter(project=OuterRef("pk"))
                .order_by()
                .values("project")
                .annotate(total=Sum("guarantee"))
                .values("total")
            ),
            0,
        ),
        lead_names=_lead_names(display=True),
        lead_usernames=_lead_names(display=False),
    )
    return sorted_by(projects, sort=sort, sorts=PROJECT_SORTS)


def project_memberships(*, project: Project) -> QuerySet[Membership]:
    return project.memberships.select_related("user").order_by("role", "user__username")


FLAVOR_SORTS: Sorts = {
    "name": (gettext_lazy("Name"), ("name", "pk")),
    "slug": (gettext_lazy("Slug"), ("slug",)),
    "-total_gpus": (gettext_lazy("Most GPUs"), ("-total_gpus", "name", "pk")),
}


def flavor_list(*, q: str | None = None, sort: str | None = None) -> QuerySet[GpuFlavor]:
    flavors = search_filter(
        GpuFlavor.objects.all(), query=q, fields=["slug", "name", "gpu_model", "gres_type"]
    )
    flavors = flavors.annotate(total_gpus=Coalesce(Sum("capacities__gpus"), 0))
    return sorted_by(flavors, sort=sort, sorts=FLAVOR_SORTS)


POOL_SORTS: Sorts = {
    "name": (gettext_lazy("Name"), ("name", "pk")),
    "slug": (gettext_lazy("Slug"), ("slug",)),
    "-project_count": (gettext_lazy("Most projects"), ("-project_count", "name", "pk")),
}


def pool_list(
    *, parent: Pool | None = None, q: str | None = None, sort: str | None = None
) -> QuerySet[Pool]:
    pools = Pool.objects.select_related("parent")
    if parent is not None:
        pools = pools.filter(parent=parent)
    pools = search_filter(pools, query=q, fields=["slug", "name", "description"])
    pools = pools.prefetch_related(
        Prefetch("capacities", queryset=PoolCapacity.objects.select_related("flavor"))
    ).annotate(
        project_count=Coalesce(
            Subquery(
                Quota.objects.filter(pool=OuterRef("pk"))
                .order_by()
                .values("pool")
                .annotate(total=Count("project", distinct=True))
                .values("total")
            ),
            0,
        )
    )
    return sorted_by(pools, sort=sort, sorts=POOL_SORTS)


TIER_SORTS: Sorts = {
    "-score": (gettext_lazy("Highest first"), ("-score", "pk")),
    "score": (gettext_lazy("Lowest first"), ("score", "pk")),
    "name": (gettext_lazy("Name"), ("name", "pk")),
    "next_review_on": (gettext_lazy("Next review"), ("next_review_on", "-score", "pk")),
}


def tier_list(
    *,
    may_preempt: bool | None = None,
    is_default: bool | None = None,
    due_before: date | None = None,
    preempts: PriorityTier | None = None,
    q: str | None = None,
    sort: str | None = None,
) -> QuerySet[PriorityTier]:
    tiers = PriorityTier.objects.select_related("owner", "aging_cap")
    if may_preempt is not None:
        tiers = tiers.filter(may_preempt=may_preempt)
    if is_default is not None:
        tiers = tiers.filter(is_default=is_default)
    if due_before is not None:
        tiers = tiers.filter(next_review_on__lt=due_before)
    if preempts is not None:
        tiers = tiers.filter(preemptible_tiers=preempts)
    tiers = search_filter(tiers, query=q, fields=["slug", "name", "description", "eligibility"])
    return sorted_by(tiers.prefetch_related("preemptible_tiers"), sort=sort, sorts=TIER_SORTS)


PREEMPTION_CLASS_SORTS: Sorts = {
    "name": (gettext_lazy("Name"), ("name", "pk")),
    "slug": (gettext_lazy("Slug"), ("slug",)),
    "kind": (gettext_lazy("Kind"), ("kind", "name", "pk")),
}


def preemption_class_list(
    *, kind: str | None = None, q: str | None = None, sort: str | None = None
) -> QuerySet[PreemptionClass]:
    classes = PreemptionClass.objects.select_related("recovery_owner")
    if kind:
        classes = classes.filter(kind=kind)
    classes = search_filter(classes, query=q, fields=["slug", "name", "business_impact"])
    classes = classes.annotate(
        quota_count=Coalesce(
            Subquery(
                Quota.objects.filter(preemption_class=OuterRef("pk"))
                .order_by()
                .values("preemption_class")
                .annotate(total=Count("*"))
                .values("total")
            ),
            0,
        )
    )
    return sorted_by(classes, sort=sort, sorts=PREEMPTION_CLASS_SORTS)


QUOTA_SORTS: Sorts = {
    "project": (gettext_lazy("Project"), ("project__name", "pool__name", "flavor__name", "pk")),
    "pool": (gettext_lazy("Pool"), ("pool__name", "flavor__name", "project__name", "pk")),
    "-guarantee": (gettext_lazy("Largest guarantee"), ("-guarantee", "project__name", "pk")),
    "next_review_on": (gettext_lazy("Next review"), ("next_review_on", "project__name", "pk")),
}


def quota_list(
    *,
    project: Project | None = None,
    pool: Pool | None = None,
    flavor: GpuFlavor | None = None,
    preemption_class: PreemptionClass | None = None,
    sort: str | None = None,
) -> QuerySet[Quota]:
    quotas: QuerySet[Quota] = KeysFirstQuerySet(Quota).select_related(
        "project", "pool", "flavor", "preemption_class"
    )
    for name, value in (
        ("project", project),
        ("pool", pool),
        ("flavor", flavor),
        ("preemption_class", preemption_class),
    ):
        if value is not None:
            quotas = quotas.filter(**{name: value})
    return sorted_by(quotas, sort=sort, sorts=QUOTA_SORTS)


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


def pool_usage(*, pool: Pool | None = None, flavor: GpuFlavor | None = None) -> list[PoolFlavorUse]:
    """Capacity against guarantees and child pools, per pool and flavor (three queries);
    only ``pool``'s or ``flavor``'s when given, so that a page about one of them sums only
    its quotas (from the ``quota_usage`` index)."""
    capacities_query = PoolCapacity.objects.select_related("pool", "flavor").order_by(
        "pool__name", "flavor__name"
    )
    quotas = Quota.objects.order_by()
    if pool is not None:  # the pool's own capacities, and its children's (committed to them)
        capacities_query = capacities_query.filter(Q(pool=pool) | Q(pool__parent=pool))
        quotas = quotas.filter(pool=pool)
    if flavor is not None:
        capacities_query = capacities_query.filter(flavor=flavor)
        quotas = quotas.filter(flavor=flavor)
    capacities = list(capacities_query)
    guaranteed = {
        (row["pool"], row["flavor"]): row["total"]
        for row in quotas.values("pool", "flavor").annotate(total=Sum("guarantee"))
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
        if pool is None or capacity.pool_id == pool.pk
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


def tiers_owned(*, user: User) -> QuerySet[PriorityTier]:
    """The tiers ``user`` is the business owner of, in the tier list's order: what the home
    page's review table shows of them (no owner, no tiers they may preempt: one query)."""
    return PriorityTier.objects.filter(owner=user).order_by(*TIER_SORTS["-score"][1])


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


# --- lookups for search-as-you-type filter fields -------------------------------------------


def user_lookup(*, q: str | None = None) -> QuerySet[User]:
    """Active users whose username, first name or last name starts with ``q`` (a prefix,
    so that an index finds them and counts them at any number of users)."""
    users = User.objects.filter(is_active=True)
    if q:
        users = users.filter(
            Q(username__istartswith=q) | Q(first_name__istartswith=q) | Q(last_name__istartswith=q)
        )
    return users.order_by("username", "pk")


def project_lookup(*, q: str | None = None) -> QuerySet[Project]:
    """Projects whose slug starts with ``q`` or whose name contains it."""
    projects = Project.objects.all()
    if q:
        projects = projects.filter(Q(slug__istartswith=q) | Q(name__icontains=q))
    return projects.order_by("name", "pk")
