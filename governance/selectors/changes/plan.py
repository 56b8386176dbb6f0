"""A rule change's plan: its scope, warnings, affected projects and pools, rollback plan."""

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.contrib.contenttypes.models import ContentType
from django.db.models import Q
from django.utils.translation import gettext_noop

from governance.models import (
    SCHEDULING_KINDS,
    ChangeStatus,
    EditKind,
    Pool,
    PriorityTier,
    Project,
    Quota,
    RuleChange,
    RuleEdit,
)
from governance.models.texts import Message, label, message, message_text

from .diff import EditRow, edit_rows_for
from .kinds import EXISTS, RuleKind, rule_kind_for
from .values import rollback_items


@dataclass
class Scope:
    """What a change touches directly (objects, pools) and what it affects."""

    targets: set[tuple[int, int]] = field(default_factory=set)  # (content type id, object id)
    pools: set[int] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)


def _by_kind(edits: Iterable[RuleEdit]) -> list[tuple[RuleKind, set[int]]]:
    """The ids of the objects ``edits`` change, per rule kind."""
    by_kind: dict[str, tuple[RuleKind, set[int]]] = {}
    for edit in edits:
        model = ContentType.objects.get_for_id(edit.content_type_id).model_class()
        kind = rule_kind_for(model) if model is not None else None
        if kind is not None:
            by_kind.setdefault(kind.object_type, (kind, set()))[1].add(edit.object_id)
    return list(by_kind.values())


def change_scope(edits: Iterable[RuleEdit]) -> Scope:
    """The objects and the pools the edits touch directly (each kind's ``touches_pools``)."""
    edits = list(edits)
    scope = Scope()
    for edit in edits:
        scope.targets.add((edit.content_type_id, edit.object_id))
        scope.kinds.add(edit.kind)
    for kind, ids in _by_kind(edits):
        if kind.touches_pools is not None:
            scope.pools.update(kind.touches_pools(ids))
    return scope


# How many earlier observed changes a warning names (the latest first).
OBSERVED_NAMED = 5


def rule_change_warnings(*, change: RuleChange, now: dt.datetime) -> list[str]:
    """What a careful operator should confirm before proposing ``change``, in the active
    language."""
    return [
        message_text(warning) for warning in rule_change_warning_messages(change=change, now=now)
    ]


def rule_change_warning_messages(*, change: RuleChange, now: dt.datetime) -> list[Message]:
    """The warnings as messages: stored on the change, read in each reader's language."""
    edits = list(change.edits.all())
    scope = change_scope(edits)
    warnings: list[Message] = []
    kinds = sorted(scope.kinds & SCHEDULING_KINDS)
    # A rollback restores what its change touched: the mix and the pools were confirmed then.
    is_rollback = change.rollback_of_id is not None
    if len(kinds) > 1 and not is_rollback:
        warnings.append(
            message(
                gettext_noop(
                    "The change mixes kinds of rule (%(kinds)s): change one variable at a time."
                ),
                kinds=[label(EditKind(kind).label, lower=True) for kind in kinds],
            )
        )
    if len(scope.pools) > 1 and not is_rollback:
        pools = Pool.objects.filter(pk__in=scope.pools).order_by("name")
        warnings.append(
            message(
                gettext_noop(
                    "The change touches %(count)d pools (%(pools)s): change one pool at a time."
                ),
                count=len(scope.pools),
                pools=", ".join(str(pool) for pool in pools),
            )
        )
    warnings.extend(_default_tier_warnings(edits))
    if kinds:  # descriptions and members alone: nothing to observe
        warnings.extend(_observed_warnings(change=change, scope=scope, now=now))
    return warnings


def _observed_warnings(*, change: RuleChange, scope: Scope, now: dt.datetime) -> list[Message]:
    """Earlier changes of the same scope still in their observation window: one warning."""
    warnings: list[Message] = []
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
    observed: list[tuple[RuleChange, dt.datetime]] = []
    for other in earlier:
        assert other.applied_at is not None
        ends = other.applied_at + dt.timedelta(days=other.observation_days)
        if ends <= now:
            continue
        other_scope = change_scope(other.edits.all())
        if not other_scope.kinds & SCHEDULING_KINDS:
            continue
        if scope.targets & other_scope.targets or scope.pools & other_scope.pools:
            observed.append((other, ends))
    if len(observed) == 1:
        other, ends = observed[0]
        assert other.applied_at is not None
        warnings.append(
            message(
                gettext_noop(
                    "Change #%(id)d (%(title)s) touched the same scope on %(date)s and is "
                    "observed until %(end)s: wait for its effect before changing more."
                ),
                id=other.pk,
                title=other.title_message or other.title,  # in the reader's language
                date=other.applied_at,
                end=ends,
            )
        )
    elif observed:
        # One warning, whatever the number: a change names the latest few by reference (the
        # changes list finds the rest), so its size stays flat as the pool's history grows.
        shown = ", ".join(f"#{other.pk}" for other, _ends in observed[:OBSERVED_NAMED])
        more = len(observed) - OBSERVED_NAMED
        warnings.append(
            message(
                gettext_noop(
                    "%(count)d changes touched the same scope and are still observed "
                    "(%(changes)s), the last until %(end)s: wait for their effect before "
                    "changing more."
                ),
                count=len(observed),
                changes=shown if more <= 0 else f"{shown} …",
                end=max(ends for _o, ends in observed),
            )
        )
    return warnings


def _default_tier_warnings(edits: list[RuleEdit]) -> list[Message]:
    """A change that makes a tier the default (creating it so, or setting it) names the tier
    it takes "default" from: that is never silent."""
    tier_type = ContentType.objects.get_for_model(PriorityTier).pk
    warnings = []
    for edit in edits:
        if edit.content_type_id != tier_type:
            continue
        if edit.field == EXISTS and isinstance(edit.new_value, dict):
            becomes_default, name = edit.new_value.get("is_default"), edit.new_value.get("name")
        elif edit.field == "is_default" and edit.new_value is True:
            becomes_default = True
            names = PriorityTier.objects.filter(pk=edit.object_id).values_list("name", flat=True)
            name = names.first()
        else:
            continue
        demoted = PriorityTier.objects.filter(is_default=True).exclude(pk=edit.object_id).first()
        if becomes_default and demoted is not None:
            warnings.append(
                message(
                    gettext_noop(
                        "The change makes “%(tier)s” the default tier: “%(demoted)s” stops "
                        "being the default, and projects without a tier of their own move to "
                        "“%(tier)s”."
                    ),
                    tier=name,
                    demoted=demoted.name,
                )
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
    rows = edit_rows_for(edits).get(change.pk, [])
    # What each kind's declaration says a change of its objects affects (``RuleKind``).
    project_q, quota_q, pool_ids = Q(pk__in=[]), Q(pk__in=[]), set()
    for kind, ids in _by_kind(edits):
        if kind.affects_projects is not None:
            project_q |= kind.affects_projects(ids)
        if kind.affects_quotas is not None:
            quota_q |= kind.affects_quotas(ids)
        for pools_of in (kind.touches_pools, kind.plan_pools):
            if pools_of is not None:
                pool_ids |= set(pools_of(ids))
    quota_rows = Quota.objects.filter(quota_q).values_list("project_id", "pool_id")
    projects_from_quotas = {project for project, _pool in quota_rows}
    projects = list(
        Project.objects.filter(project_q | Q(pk__in=projects_from_quotas)).order_by("name")
    )
    pool_ids |= {pool for _project, pool in quota_rows}
    pool_ids |= set(
        Quota.objects.filter(project__in=[p.pk for p in projects]).values_list("pool_id", flat=True)
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
    rows = edit_rows_for([item.edit for item in items], current=current).get(change.pk, [])
    by_edit = {row.edit.pk: row for row in rows}
    return [
        RollbackRow(row=by_edit[item.edit.pk], conflict=item.conflict, needed=item.needed)
        for item in items
    ]
