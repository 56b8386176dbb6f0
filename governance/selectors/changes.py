"""Reads of rule changes: the timeline, a change's plan (diff, scope, warnings), the
rollback plan, the per-object timeline, and the reviews that are due."""

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import FieldDoesNotExist, ObjectDoesNotExist
from django.db import models
from django.db.models import Prefetch, Q, QuerySet
from django.http import Http404
from django.utils import formats
from django.utils.text import capfirst
from django.utils.translation import gettext as _

from governance.models import (
    SCHEDULING_KINDS,
    ChangeStatus,
    EditKind,
    GpuFlavor,
    Membership,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PriorityTier,
    Project,
    ProjectRole,
    Quota,
    RuleChange,
    RuleEdit,
    User,
)

from .rules import user_can_read_rules

EMPTY = "—"

# How pages and the API name the kinds of object a change may edit.
OBJECT_TYPES: dict[str, type[models.Model]] = {
    "project": Project,
    "flavor": GpuFlavor,
    "pool": Pool,
    "tier": PriorityTier,
    "preemption_class": PreemptionClass,
    "quota": Quota,
}
TYPE_OF_MODEL = {model: name for name, model in OBJECT_TYPES.items()}
CAPACITY, MEMBERSHIP = "capacity", "membership"


def object_type_of(model: type[models.Model]) -> str:
    return TYPE_OF_MODEL.get(model, model._meta.model_name or "")


def object_key(obj: models.Model) -> str:
    """How URLs name the object: the id of a quota, the slug of anything else."""
    return str(obj.pk) if isinstance(obj, Quota) else str(obj.slug)  # type: ignore[attr-defined]


def object_lookup(object_type: str, key: str) -> models.Model | None:
    """The object named ``<type>:<key>`` in filters, or ``None``."""
    model = OBJECT_TYPES.get(object_type)
    if model is None:
        return None
    try:
        if model is Quota:
            return model._default_manager.filter(pk=int(key)).first()
        return model._default_manager.filter(slug=key).first()
    except (ValueError, TypeError):
        return None


# --- values --------------------------------------------------------------------------------


def model_field(model: type[models.Model], name: str) -> Any:
    """The model field ``name``, or ``None`` for a keyed field (capacity, membership)."""
    try:
        return model._meta.get_field(name)
    except FieldDoesNotExist:
        return None


def value_to_json(model: type[models.Model], name: str, value: Any) -> Any:
    """A value as a change stores it: ids for relations, ISO dates, plain JSON otherwise."""
    field = model_field(model, name)
    if field is not None and field.many_to_many:
        return sorted(item.pk if isinstance(item, models.Model) else int(item) for item in value)
    if isinstance(value, models.Model):
        return value.pk
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def current_value(obj: models.Model, name: str, key: int | None = None) -> Any:
    """The stored value of ``obj.name`` now, as JSON."""
    if isinstance(obj, Pool) and name == CAPACITY:
        gpus = PoolCapacity.objects.filter(pool=obj, flavor_id=key).values_list("gpus", flat=True)
        return gpus.first() or 0
    if isinstance(obj, Project) and name == MEMBERSHIP:
        if key is None:
            return None
        return (
            Membership.objects.filter(project=obj, user__pk=key)
            .values_list("role", flat=True)
            .first()
        )
    field = model_field(type(obj), name)
    if field.many_to_many:
        return sorted(getattr(obj, name).values_list("pk", flat=True))
    return value_to_json(type(obj), name, getattr(obj, field.attname))


def stale_edits(*, change: RuleChange) -> list[tuple[RuleEdit, Any]]:
    """The edits whose field no longer holds the value the change recorded as "before"."""
    stale = []
    for edit in change.edits.select_related("content_type").order_by("pk"):
        model = edit.content_type.model_class()
        assert model is not None
        obj = model._default_manager.filter(pk=edit.object_id).first()
        now_value = None if obj is None else current_value(obj, edit.field, edit.key)
        if obj is None or now_value != edit.old_value:
            stale.append((edit, now_value))
    return stale


@dataclass(frozen=True)
class RollbackItem:
    """One field a rollback would restore: its value before the change, after it, and now."""

    edit: RuleEdit
    restore: Any  # the value before the change
    applied: Any  # the value the change set
    current: Any  # the value now

    @property
    def conflict(self) -> bool:
        """A later change touched the field: restoring would overwrite it."""
        return self.current != self.applied

    @property
    def needed(self) -> bool:
        return self.current != self.restore


def rollback_items(*, change: RuleChange) -> list[RollbackItem]:
    items = []
    for edit in change.edits.select_related("content_type").order_by("pk"):
        model = edit.content_type.model_class()
        assert model is not None
        obj = model._default_manager.filter(pk=edit.object_id).first()
        current = None if obj is None else current_value(obj, edit.field, edit.key)
        items.append(
            RollbackItem(edit=edit, restore=edit.old_value, applied=edit.new_value, current=current)
        )
    return items


# --- lists ----------------------------------------------------------------------------------


def rule_change_list() -> QuerySet[RuleChange]:
    """Every change, newest first, with its people and edits (a fixed number of queries)."""
    return (
        RuleChange.objects.select_related(
            "author", "proposed_by", "approved_by", "applied_by", "closed_by", "rollback_of"
        )
        .prefetch_related(
            Prefetch(
                "edits", queryset=RuleEdit.objects.select_related("content_type").order_by("pk")
            )
        )
        .order_by("-created_at", "-pk")
    )


def rule_change_filter(
    queryset: QuerySet[RuleChange],
    *,
    status: str | None = None,
    kind: str | None = None,
    target: models.Model | None = None,
    author: User | None = None,
    since: dt.date | None = None,
    until: dt.date | None = None,
) -> QuerySet[RuleChange]:
    if status:
        queryset = queryset.filter(status=status)
    if kind:
        queryset = queryset.filter(edits__kind=kind)
    if target is not None:
        queryset = queryset.filter(
            edits__content_type=ContentType.objects.get_for_model(type(target)),
            edits__object_id=target.pk,
        )
    if author is not None:
        queryset = queryset.filter(author=author)
    if since is not None:
        queryset = queryset.filter(created_at__date__gte=since)
    if until is not None:
        queryset = queryset.filter(created_at__date__lte=until)
    if kind or target is not None:
        queryset = queryset.distinct()
    return queryset


def rule_change_get(*, user: Any, pk: int | str) -> RuleChange:
    if not user_can_read_rules(user):
        raise Http404
    try:
        return rule_change_list().get(pk=pk)
    except (ObjectDoesNotExist, ValueError, TypeError):
        raise Http404 from None


def rule_changes_for_object(*, obj: models.Model, limit: int = 10) -> list[RuleChange]:
    """The latest changes that edit ``obj`` (its per-object timeline)."""
    return list(rule_change_filter(rule_change_list(), target=obj)[:limit])


# --- the diff ------------------------------------------------------------------------------


@dataclass(frozen=True)
class EditRow:
    """One edit as pages and the API show it."""

    edit: RuleEdit
    object_type: str
    object_key: str
    object_name: str
    object_url: str
    field: str
    field_label: str
    kind: str
    kind_label: str
    old: str
    new: str
    current: str = ""


def edit_rows(changes: Iterable[RuleChange]) -> dict[int, list[EditRow]]:
    """Every edit of ``changes`` with names instead of ids.

    Queries: one per kind of object edited, one per kind of related object named in the
    values; never one per change or per edit.
    """
    edits = [edit for change in changes for edit in change.edits.all()]
    return _rows(edits)


def _rows(
    edits: Sequence[RuleEdit], current: dict[int, Any] | None = None
) -> dict[int, list[EditRow]]:
    targets: dict[type[models.Model], set[int]] = {}
    related: dict[type[models.Model], set[Any]] = {}
    for edit in edits:
        model = edit.content_type.model_class()
        assert model is not None
        targets.setdefault(model, set()).add(edit.object_id)
        related_model, _label = _related_of(model, edit.field)
        if edit.key is not None:
            key_model = GpuFlavor if edit.field == CAPACITY else User
            related.setdefault(key_model, set()).add(edit.key)
        if related_model is not None:
            values = [edit.old_value, edit.new_value]
            if current and edit.pk in current:
                values.append(current[edit.pk])
            for value in values:
                if isinstance(value, list):
                    related.setdefault(related_model, set()).update(value)
                elif value is not None:
                    related.setdefault(related_model, set()).add(value)
    objects = {model: _named(model).in_bulk(ids) for model, ids in targets.items() if ids}
    names = {
        model: {pk: str(obj) for pk, obj in _named(model).in_bulk(ids).items()}
        for model, ids in related.items()
        if ids
    }
    rows: dict[int, list[EditRow]] = {}
    for edit in edits:
        model = edit.content_type.model_class()
        assert model is not None
        obj = objects.get(model, {}).get(edit.object_id)
        rows.setdefault(edit.change_id, []).append(
            EditRow(
                edit=edit,
                object_type=object_type_of(model),
                object_key=object_key(obj) if obj is not None else str(edit.object_id),
                object_name=str(obj)
                if obj is not None
                else _("deleted (#%(id)s)") % {"id": edit.object_id},
                object_url=obj.get_absolute_url() if obj is not None else "",  # type: ignore[attr-defined]
                field=edit.field,
                field_label=_field_label(model, edit, names),
                kind=edit.kind,
                kind_label=str(EditKind(edit.kind).label),
                old=display_value(model, edit.field, edit.old_value, names),
                new=display_value(model, edit.field, edit.new_value, names),
                current=(
                    display_value(model, edit.field, current[edit.pk], names)
                    if current and edit.pk in current
                    else ""
                ),
            )
        )
    return rows


def _named(model: type[models.Model]) -> QuerySet[Any]:
    """Rows of ``model`` with what their names need (a quota names its project, pool, flavor)."""
    if model is Quota:
        return Quota.objects.select_related("project", "pool", "flavor")
    return model._default_manager.all()


def _related_of(model: type[models.Model], name: str) -> tuple[type[models.Model] | None, str]:
    if name in (CAPACITY, MEMBERSHIP):
        return None, name
    try:
        field = model._meta.get_field(name)
    except FieldDoesNotExist:
        return None, name
    return (field.related_model if field.is_relation else None), str(
        getattr(field, "verbose_name", name)
    )


def _field_label(
    model: type[models.Model], edit: RuleEdit, names: dict[type[models.Model], dict[Any, str]]
) -> str:
    if edit.field == CAPACITY:
        return _("GPUs of %(flavor)s") % {
            "flavor": names.get(GpuFlavor, {}).get(edit.key, edit.key)
        }
    if edit.field == MEMBERSHIP:
        return _("Role of %(user)s") % {"user": names.get(User, {}).get(edit.key, edit.key)}
    return capfirst(_related_of(model, edit.field)[1])


def display_value(
    model: type[models.Model],
    name: str,
    value: Any,
    names: dict[type[models.Model], dict[Any, str]],
) -> str:
    if name == MEMBERSHIP:
        return str(ProjectRole(value).label) if value else _("not a member")
    if value is None or value == "" or value == []:
        return EMPTY
    if name == CAPACITY:
        return str(value)
    field = model_field(model, name)
    if field is None:
        return str(value)
    if field.is_relation:
        known = names.get(field.related_model, {})
        ids = value if isinstance(value, list) else [value]
        return ", ".join(sorted(known.get(pk) or _("deleted (#%(id)s)") % {"id": pk} for pk in ids))
    if field.choices:
        return str(dict(field.flatchoices).get(value, value))
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(field, models.DateField) and isinstance(value, str):
        try:
            return formats.localize(dt.date.fromisoformat(value))
        except ValueError:
            return value
    return str(value)


# --- scope and warnings ---------------------------------------------------------------------


@dataclass
class Scope:
    """What a change touches directly (objects, pools) and what it affects."""

    targets: set[tuple[int, int]] = field(default_factory=set)  # (content type id, object id)
    pools: set[int] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)


def change_scope(edits: Iterable[RuleEdit]) -> Scope:
    scope = Scope()
    quota_ids = []
    pool_ct = ContentType.objects.get_for_model(Pool).pk
    quota_ct = ContentType.objects.get_for_model(Quota).pk
    for edit in edits:
        scope.targets.add((edit.content_type_id, edit.object_id))
        scope.kinds.add(edit.kind)
        if edit.content_type_id == pool_ct:
            scope.pools.add(edit.object_id)
        elif edit.content_type_id == quota_ct:
            quota_ids.append(edit.object_id)
    if quota_ids:
        scope.pools.update(Quota.objects.filter(pk__in=quota_ids).values_list("pool_id", flat=True))
    return scope


def rule_change_warnings(*, change: RuleChange, now: dt.datetime) -> list[str]:
    """What a careful operator should confirm before proposing ``change``."""
    edits = list(change.edits.all())
    scope = change_scope(edits)
    warnings = []
    kinds = sorted(scope.kinds & SCHEDULING_KINDS)
    # A rollback restores what its change touched: the mix and the pools were confirmed then.
    is_rollback = change.rollback_of_id is not None
    if len(kinds) > 1 and not is_rollback:
        warnings.append(
            _("The change mixes kinds of rule (%(kinds)s): change one variable at a time.")
            % {"kinds": ", ".join(str(EditKind(kind).label).lower() for kind in kinds)}
        )
    if len(scope.pools) > 1 and not is_rollback:
        pools = Pool.objects.filter(pk__in=scope.pools).order_by("name")
        warnings.append(
            _("The change touches %(count)d pools (%(pools)s): change one pool at a time.")
            % {"count": len(scope.pools), "pools": ", ".join(str(pool) for pool in pools)}
        )
    earlier = (
        RuleChange.objects.filter(
            status=ChangeStatus.APPLIED,
            applied_at__gte=now - dt.timedelta(days=366),
            applied_at__lte=now,
        )
        .exclude(pk=change.pk)
        .exclude(pk=change.rollback_of_id or 0)
        .prefetch_related("edits")
        .order_by("-applied_at")
    )
    if not kinds:
        return warnings  # descriptions and members: nothing to observe
    for other in earlier:
        assert other.applied_at is not None
        ends = other.applied_at + dt.timedelta(days=other.observation_days)
        if ends <= now:
            continue
        other_scope = change_scope(other.edits.all())
        if not other_scope.kinds & SCHEDULING_KINDS:
            continue
        if scope.targets & other_scope.targets or scope.pools & other_scope.pools:
            warnings.append(
                _(
                    "Change #%(id)d (%(title)s) touched the same scope on %(date)s and is "
                    "observed until %(end)s: wait for its effect before changing more."
                )
                % {
                    "id": other.pk,
                    "title": other.title,
                    "date": formats.date_format(other.applied_at, "SHORT_DATE_FORMAT"),
                    "end": formats.date_format(ends, "SHORT_DATE_FORMAT"),
                }
            )
    return warnings


@dataclass(frozen=True)
class ChangePlan:
    change: RuleChange
    rows: list[EditRow]
    projects: list[Project]
    pools: list[Pool]
    kinds: list[str]


def rule_change_plan(*, change: RuleChange) -> ChangePlan:
    """Every field old → new, and which projects and pools the change affects."""
    edits = list(change.edits.all())
    rows = _rows(edits).get(change.pk, [])
    by_model: dict[type[models.Model], set[int]] = {}
    for edit in edits:
        model = edit.content_type.model_class()
        assert model is not None
        by_model.setdefault(model, set()).add(edit.object_id)
    project_q = Q(pk__in=by_model.get(Project, set()))
    quota_q = Q(pk__in=by_model.get(Quota, set()))
    tiers = by_model.get(PriorityTier, set())
    if tiers:
        project_q |= Q(tier__in=tiers)
        if PriorityTier.objects.filter(pk__in=tiers, is_default=True).exists():
            project_q |= Q(tier__isnull=True)
    quota_q |= Q(preemption_class__in=by_model.get(PreemptionClass, set()))
    quota_q |= Q(flavor__in=by_model.get(GpuFlavor, set()))
    quota_q |= Q(pool__in=by_model.get(Pool, set()))
    quota_rows = Quota.objects.filter(quota_q).values_list("project_id", "pool_id")
    projects_from_quotas = {project for project, _pool in quota_rows}
    projects = list(
        Project.objects.filter(project_q | Q(pk__in=projects_from_quotas)).order_by("name")
    )
    pool_ids = {pool for _project, pool in quota_rows} | by_model.get(Pool, set())
    pool_ids |= set(
        Quota.objects.filter(project__in=[p.pk for p in projects]).values_list("pool_id", flat=True)
    )
    pool_ids |= set(
        PoolCapacity.objects.filter(flavor__in=by_model.get(GpuFlavor, set())).values_list(
            "pool_id", flat=True
        )
    )
    pools = list(Pool.objects.filter(pk__in=pool_ids).order_by("name"))
    kinds = sorted({edit.kind for edit in edits})
    return ChangePlan(change=change, rows=rows, projects=projects, pools=pools, kinds=kinds)


@dataclass(frozen=True)
class RollbackRow:
    row: EditRow
    conflict: bool
    needed: bool


def rollback_plan(*, change: RuleChange) -> list[RollbackRow]:
    """Per field the change touched: the value to restore, what it set, what it is now."""
    items = rollback_items(change=change)
    current = {item.edit.pk: item.current for item in items}
    rows = _rows([item.edit for item in items], current=current).get(change.pk, [])
    by_edit = {row.edit.pk: row for row in rows}
    return [
        RollbackRow(row=by_edit[item.edit.pk], conflict=item.conflict, needed=item.needed)
        for item in items
    ]


# --- reviews --------------------------------------------------------------------------------


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
