"""Reads of the governed rules, shaped for pages and the API.

The scoped getters (``<kind>_get``) are the one place that decides whether a user may see
or edit an object; HTML views and API views both call them. Every signed-in, active user
may read every rule (the pool is shared, so its rules are public inside the organisation);
only ops may edit them.
"""

import json
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, NamedTuple, TypeVar

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.db import models
from django.db.models import Count, OuterRef, Prefetch, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.http import Http404
from django.utils import formats
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
        .filter(next_review_on__lte=today + timedelta(days=window_days))
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


def allowed_tiers(*, project: Project, default: PriorityTier | None) -> list[PriorityTier]:
    """The tiers a project's work may use: its tier (or the default) and every tier below."""
    top = project.tier or default
    if top is None:
        return []
    return list(PriorityTier.objects.filter(score__lte=top.score).order_by("-score"))


def search_filter(queryset: QuerySet[M], *, query: str, fields: list[str]) -> QuerySet[M]:
    if not query:
        return queryset
    condition = Q()
    for field in fields:
        condition |= Q(**{f"{field}__icontains": query})
    return queryset.filter(condition)


# --- history ------------------------------------------------------------------------------

EMPTY = "—"
HISTORY_ACTIONS = {"+": "created", "~": "changed", "-": "deleted"}


class FieldChange(NamedTuple):
    field: str
    old: str
    new: str


@dataclass(frozen=True)
class HistoryEntry:
    """One history row: who did what to which fields, when and why."""

    when: datetime
    user: User | None
    reason: str
    action: str  # "created", "changed" or "deleted"
    changes: list[FieldChange]
    subject: str = ""  # for rows of a related kind: the member, the flavor


def history_entries(*, obj: models.Model) -> list[HistoryEntry]:
    """The history of ``obj``, newest first, with every changed field shown old → new.

    The number of queries does not grow with the number of rows: one for the rows, one per
    tracked many-to-many field, one per related model whose names are shown.
    """
    return _history_entries(obj.history.all(), model=type(obj))  # type: ignore[attr-defined]


def membership_history_entries(*, project: Project) -> list[HistoryEntry]:
    """Members added to, changed in or removed from ``project``; the subject is the member."""
    return _history_entries(
        Membership.history.filter(project_id=project.pk),  # type: ignore[attr-defined]
        model=Membership,
        subject_field="user",
    )


def capacity_history_entries(*, pool: Pool) -> list[HistoryEntry]:
    """Capacity set in ``pool``, per flavor; the subject is the flavor."""
    return _history_entries(
        PoolCapacity.history.filter(pool_id=pool.pk),  # type: ignore[attr-defined]
        model=PoolCapacity,
        subject_field="flavor",
    )


def _history_entries(
    records_qs: QuerySet[Any], *, model: type[models.Model], subject_field: str | None = None
) -> list[HistoryEntry]:
    records = list(
        records_qs.select_related("history_user").order_by("-history_date", "-history_id")
    )
    if not records:
        return []
    history_model = type(records[0])
    fields: dict[str, Any] = {
        field.name: field for field in model._meta.get_fields() if isinstance(field, models.Field)
    }
    order = {name: index for index, name in enumerate(fields)}
    m2m_fields = list(getattr(history_model, "_history_m2m_fields", []))
    m2m_names = [field.name for field in m2m_fields]
    m2m_values = _history_m2m_values(
        history_model, m2m_fields, object_ids={record.id for record in records}
    )
    tracked = [
        field.name
        for field in records[0].tracked_fields
        if field.editable and not field.primary_key
    ]

    # First pass: the raw changes of every row (ids for foreign keys), oldest row first.
    raw: list[tuple[Any, list[tuple[str, Any, Any]]]] = []
    previous: dict[Any, Any] = {}  # object id → its row before this one
    for record in reversed(records):
        before = previous.get(record.id)
        changes: list[tuple[str, Any, Any]]
        if record.history_type == "-":
            changes = []
        elif before is None or record.history_type == "+":
            changes = [(name, None, getattr(record, fields[name].attname)) for name in tracked]
            changes += [
                (name, frozenset(), m2m_values[name].get(record.history_id, frozenset()))
                for name in m2m_names
            ]
            changes = [change for change in changes if not _is_empty(change[2])]
        else:
            delta = record.diff_against(before, excluded_fields=m2m_names)
            changes = [(change.field, change.old, change.new) for change in delta.changes]
            for name in m2m_names:
                old = m2m_values[name].get(before.history_id, frozenset())
                new = m2m_values[name].get(record.history_id, frozenset())
                if old != new:
                    changes.append((name, old, new))
        changes.sort(key=lambda change: order.get(change[0], 0))
        raw.append((record, changes))
        previous[record.id] = record

    # Second pass: one query per related model to show names instead of ids.
    related_ids: dict[Any, set[Any]] = {}
    for record, changes in raw:
        rows = list(changes)
        if subject_field:
            rows.append((subject_field, None, getattr(record, fields[subject_field].attname)))
        for name, old, new in rows:
            if fields[name].is_relation:
                ids = related_ids.setdefault(fields[name].related_model, set())
                for value in (old, new):
                    if isinstance(value, frozenset):
                        ids.update(value)
                    elif value is not None:
                        ids.add(value)
    names = {
        related: {pk: str(item) for pk, item in related._default_manager.in_bulk(ids).items()}
        for related, ids in related_ids.items()
    }

    return [
        HistoryEntry(
            when=record.history_date,
            user=record.history_user,
            reason=record.history_change_reason or "",
            action=HISTORY_ACTIONS.get(record.history_type, "changed"),
            changes=[
                FieldChange(
                    field=str(fields[name].verbose_name),
                    old=_display(fields[name], old, names),
                    new=_display(fields[name], new, names),
                )
                for name, old, new in changes
            ],
            subject=(
                _display(
                    fields[subject_field],
                    getattr(record, fields[subject_field].attname),
                    names,
                )
                if subject_field
                else ""
            ),
        )
        for record, changes in reversed(raw)
    ]


def _history_m2m_values(
    history_model: type[models.Model], m2m_fields: list[Any], *, object_ids: set[Any]
) -> dict[str, dict[int, frozenset[Any]]]:
    """For each tracked many-to-many field: history row id → the related ids it recorded."""
    values: dict[str, dict[int, frozenset[Any]]] = {}
    for field in m2m_fields:
        through = getattr(history_model, field.name).model
        target = through._meta.get_field(field.m2m_reverse_field_name()).attname
        collected: dict[int, set[Any]] = {}
        for history_id, related_id in through.objects.filter(
            history__id__in=object_ids
        ).values_list("history_id", target):
            collected.setdefault(history_id, set()).add(related_id)
        values[field.name] = {key: frozenset(ids) for key, ids in collected.items()}
    return values


def _is_empty(value: Any) -> bool:
    return value is None or value == "" or value == frozenset()


def _display(field: Any, value: Any, names: dict[type[models.Model], dict[Any, str]]) -> str:
    if _is_empty(value):
        return EMPTY
    if field.is_relation:
        known = names.get(field.related_model, {})
        ids = sorted(value) if isinstance(value, frozenset) else [value]
        shown = [known.get(pk) or _("deleted (#%(id)s)") % {"id": pk} for pk in ids]
        return ", ".join(sorted(shown))
    if field.choices:
        return str(dict(field.flatchoices).get(value, value))
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, date | datetime):
        return formats.localize(value)
    return str(value)
