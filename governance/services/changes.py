"""Rule changes: propose, approve, apply and roll back audited sets of rule edits.

Every edit of a rule goes through a change. A change records, per object and field, the
value before and the value it sets; it is proposed (with its plan checked by a dry run),
approved by someone other than its proposer, and applied in one transaction through the
service of each rule kind, so that a failing invariant in any edit leaves every edit
unapplied. History rows written while applying point to the change. A rollback is a new
change; nothing is edited or deleted afterwards.
"""

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import (
    ChangeStatus,
    EditKind,
    GpuFlavor,
    Membership,
    Pool,
    PreemptionClass,
    PriorityTier,
    Project,
    ProjectRole,
    Quota,
    RevisionTrigger,
    RuleChange,
    RuleEdit,
    User,
    applying_change,
)
from governance.selectors.changes import (
    current_value,
    model_field,
    rollback_items,
    rule_change_warnings,
    stale_edits,
    value_to_json,
)

from ._history import require_reason
from .flavors import FLAVOR_EDITABLE, flavor_update
from .pools import POOL_EDITABLE, pool_capacity_set, pool_update
from .preemption import PREEMPTION_CLASS_EDITABLE, preemption_class_update
from .projects import PROJECT_EDITABLE, membership_remove, membership_set, project_update
from .quotas import QUOTA_EDITABLE, quota_update
from .revisions import rules_revision_create
from .tiers import TIER_EDITABLE, tier_update

CAPACITY = "capacity"  # keyed field of a pool: GPUs per flavor (key: the flavor id)
MEMBERSHIP = "membership"  # keyed field of a project: a user's role (key: the user id)
KEEP, RESTORE = "keep", "restore"
TITLE_MAX_LENGTH = 200


def _kinds(fields: Iterable[str], kind: EditKind, **overrides: EditKind) -> dict[str, EditKind]:
    return {name: overrides.get(name, kind) for name in fields}


# What may be edited through a change, per model, and what kind of edit each field is.
EDITABLE: dict[type[models.Model], dict[str, EditKind]] = {
    Quota: _kinds(QUOTA_EDITABLE, EditKind.QUOTA, preemption_class=EditKind.PREEMPTION),
    PriorityTier: _kinds(
        (*TIER_EDITABLE, "preemptible_tiers"),
        EditKind.PRIORITY,
        name=EditKind.DESCRIPTION,
        description=EditKind.DESCRIPTION,
    ),
    PreemptionClass: _kinds(
        PREEMPTION_CLASS_EDITABLE, EditKind.PREEMPTION, name=EditKind.DESCRIPTION
    ),
    GpuFlavor: _kinds(FLAVOR_EDITABLE, EditKind.PLACEMENT, name=EditKind.DESCRIPTION),
    Pool: _kinds(
        (*POOL_EDITABLE, CAPACITY),
        EditKind.DESCRIPTION,
        parent=EditKind.CAPACITY,
        capacity=EditKind.CAPACITY,
    ),
    Project: _kinds(
        (*PROJECT_EDITABLE, MEMBERSHIP),
        EditKind.DESCRIPTION,
        tier=EditKind.PRIORITY,
        membership=EditKind.ACCESS,
    ),
}
KEYED = {(Pool, CAPACITY): GpuFlavor, (Project, MEMBERSHIP): User}


@dataclass(frozen=True)
class EditSpec:
    """One edit as a page or the API asks for it: the object, the field and its new value.

    ``value`` is what the rule kind's service takes (a model instance for a foreign key, an
    iterable of instances for a many-to-many field). ``key`` names the entry of a keyed
    field: the flavor of a pool's ``capacity``, the user of a project's ``membership``
    (whose value is a role, or ``None`` to remove the member).
    """

    target: models.Model
    field: str
    value: Any
    key: models.Model | None = None


# --- values ---------------------------------------------------------------------------------


def value_from_json(model: type[models.Model], name: str, value: Any) -> Any:
    """A stored value as the rule kind's service takes it."""
    field = model_field(model, name)
    if field is None or value is None:
        return value
    if field.many_to_many:
        related = field.related_model._default_manager.in_bulk(value)
        return [related[pk] for pk in value if pk in related]
    if field.is_relation:
        found = field.related_model._default_manager.filter(pk=value).first()
        if found is None:
            raise ValidationError(
                {
                    name: _("%(kind)s #%(id)s no longer exists.")
                    % {"kind": field.verbose_name, "id": value}
                }
            )
        return found
    if isinstance(field, models.DateField) and isinstance(value, str):
        return dt.date.fromisoformat(value)
    return value


# --- creating and proposing -----------------------------------------------------------------


def _require_may_propose(user: User, edits: Sequence[EditSpec]) -> None:
    if user.is_ops:
        return
    tier_ids = {edit.target.pk for edit in edits if isinstance(edit.target, PriorityTier)}
    if (
        edits
        and len(tier_ids) == len({(type(edit.target), edit.target.pk) for edit in edits})
        and PriorityTier.objects.filter(pk__in=tier_ids, owner=user).count() == len(tier_ids)
    ):
        return
    raise PermissionDenied(
        _("Only ops, or the business owner of a tier for that tier, may propose rule changes.")
    )


def _edit_rows(change: RuleChange, edits: Sequence[EditSpec]) -> list[RuleEdit]:
    rows: list[RuleEdit] = []
    seen: set[tuple[int, int, str, int | None]] = set()
    stored: dict[tuple[type[models.Model], Any], models.Model] = {}
    errors: dict[str, list[str]] = {}
    for edit in edits:
        model = type(edit.target)
        fields = EDITABLE.get(model)
        if fields is None or edit.field not in fields:
            errors.setdefault(edit.field, []).append(_("This field cannot be changed here."))
            continue
        key_model = KEYED.get((model, edit.field))
        if key_model is not None and not isinstance(edit.key, key_model):
            errors.setdefault(edit.field, []).append(_("Say which entry to change."))
            continue
        key = edit.key.pk if key_model is not None and edit.key is not None else None
        if edit.field == CAPACITY:
            new = edit.value
            if not isinstance(new, int) or isinstance(new, bool) or new < 0:
                errors.setdefault("gpus", []).append(_("Enter a whole number of GPUs (0 or more)."))
                continue
        elif edit.field == MEMBERSHIP:
            new = edit.value
            if new is not None and new not in ProjectRole.values:
                errors.setdefault("role", []).append(_("Choose a project role."))
                continue
        else:
            new = value_to_json(model, edit.field, edit.value)
        fresh = stored.get((model, edit.target.pk))
        if fresh is None:
            # The stored row, not the caller's copy: "before" is what the database holds.
            fresh = stored[(model, edit.target.pk)] = model._default_manager.get(pk=edit.target.pk)
        old = current_value(fresh, edit.field, key)
        if old == new:
            continue
        identity = (ContentType.objects.get_for_model(model).pk, edit.target.pk, edit.field, key)
        if identity in seen:
            errors.setdefault(edit.field, []).append(_("A change edits each field once."))
            continue
        seen.add(identity)
        rows.append(
            RuleEdit(
                change=change,
                content_type_id=identity[0],
                object_id=edit.target.pk,
                field=edit.field,
                key=key,
                kind=EDITABLE[model][edit.field],
                old_value=old,
                new_value=new,
            )
        )
    if errors:
        raise ValidationError(errors)
    return rows


def _default_title(edits: Sequence[EditSpec]) -> str:
    targets = list(dict.fromkeys(str(edit.target) for edit in edits))
    fields = list(dict.fromkeys(_field_label(edit) for edit in edits))
    title = _("%(objects)s: %(fields)s") % {
        "objects": ", ".join(targets),
        "fields": ", ".join(fields),
    }
    return title[: TITLE_MAX_LENGTH - 1] + "…" if len(title) > TITLE_MAX_LENGTH else title


def _field_label(edit: EditSpec) -> str:
    if edit.field == CAPACITY:
        return _("capacity of %(flavor)s") % {"flavor": edit.key}
    if edit.field == MEMBERSHIP:
        return _("membership of %(user)s") % {"user": edit.key}
    field = model_field(type(edit.target), edit.field)
    return str(field.verbose_name) if field is not None else edit.field


@transaction.atomic
def rule_change_create(
    *,
    user: User,
    reason: str,
    edits: Sequence[EditSpec],
    title: str = "",
    ticket: str = "",
    observation_days: int | None = None,
    rollback_condition: str = "",
    confirmation_reason: str = "",
    rollback_of: RuleChange | None = None,
    submit: bool = True,
    now: dt.datetime | None = None,
) -> RuleChange:
    """Record a change of the given edits (only the fields whose value differs).

    With ``submit`` (the default) the change is proposed at once, which checks its plan;
    otherwise it stays a draft. Raises ``ValidationError`` when nothing would change.
    """
    _require_may_propose(user, edits)
    change = RuleChange(
        title=(title or "").strip() or _default_title(edits),
        reason=require_reason(reason),
        ticket=(ticket or "").strip(),
        author=user,
        rollback_condition=(rollback_condition or "").strip(),
        rollback_of=rollback_of,
    )
    if observation_days is not None:
        change.observation_days = observation_days
    change.full_clean(exclude=["author"])
    change.save()
    rows = _edit_rows(change, edits)
    if not rows:
        raise ValidationError(
            _("Nothing would change: every field already has the value asked for.")
        )
    for row in rows:
        row.full_clean(exclude=["change", "content_type"], validate_constraints=False)
    RuleEdit.objects.bulk_create(rows)
    if submit:
        change = rule_change_propose(
            change=change, user=user, confirmation_reason=confirmation_reason, now=now
        )
    return change


def _dry_run(change: RuleChange, user: User) -> None:
    """Apply the change in a savepoint and undo it: the services' checks run on the real
    rows, so an overcommitted pool or an unsafe tier is refused when proposed."""

    class _Undo(Exception):
        pass

    try:
        with transaction.atomic():
            _apply_edits(change, user=user)
            raise _Undo
    except _Undo:
        pass


@transaction.atomic
def rule_change_propose(
    *,
    change: RuleChange,
    user: User,
    confirmation_reason: str = "",
    now: dt.datetime | None = None,
) -> RuleChange:
    """Draft → proposed. A plan that warns (mixed kinds, several pools, inside the
    observation window of an earlier change) needs a confirmation with a reason."""
    change = _lock(change)
    if change.status != ChangeStatus.DRAFT:
        raise ValidationError(
            _("Only a draft can be proposed; this change is %(status)s.")
            % {"status": change.get_status_display().lower()}
        )
    if user.pk != change.author_id and not user.is_ops:
        raise PermissionDenied(_("Only the author or ops may propose this change."))
    now = now or timezone.now()
    warnings = rule_change_warnings(change=change, now=now)
    confirmation_reason = (confirmation_reason or "").strip()
    if warnings and not confirmation_reason:
        raise ValidationError(
            {
                "confirmation_reason": [
                    *warnings,
                    _("Confirm with a reason to propose it anyway, or split the change."),
                ]
            }
        )
    if user.is_ops:
        _dry_run(change, user)
    change.warnings = warnings
    change.confirmation_reason = confirmation_reason if warnings else ""
    change.status = ChangeStatus.PROPOSED
    change.proposed_by = user
    change.proposed_at = now
    _save(change, user=user, reason=_("Proposed"))
    return change


# --- deciding -------------------------------------------------------------------------------


def _lock(change: RuleChange) -> RuleChange:
    return RuleChange.objects.select_for_update().get(pk=change.pk)


def _save(change: RuleChange, *, user: User, reason: str) -> None:
    change.full_clean()
    change._history_user = user  # type: ignore[attr-defined]
    change._change_reason = reason  # type: ignore[attr-defined]
    change.save()


def _targets(change: RuleChange) -> list[models.Model | None]:
    result = []
    for edit in change.edits.select_related("content_type"):
        model = edit.content_type.model_class()
        assert model is not None
        result.append(model._default_manager.filter(pk=edit.object_id).first())
    return result


def approval_problem(*, change: RuleChange, user: User) -> str | None:
    """Why ``user`` may not approve (or reject) ``change``, or ``None`` when they may."""
    if not user.is_active:
        return _("Your account is inactive.")
    if user.pk in (change.author_id, change.proposed_by_id):
        return _("You proposed this change: someone else must approve it.")
    proposers = {change.author_id, change.proposed_by_id}
    needs_ops = False
    for obj in _targets(change):
        if isinstance(obj, PriorityTier):
            if obj.owner_id == user.pk or (user.is_ops and obj.owner_id in proposers):
                continue
            return _(
                "A change to the tier “%(tier)s” needs its business owner, %(owner)s (or ops "
                "when the owner proposed it)."
            ) % {"tier": obj.name, "owner": obj.owner}
        needs_ops = True
    if needs_ops and not user.is_ops:
        return _("A change to quotas, pools, projects, flavors or preemption classes needs ops.")
    return None


def _require_status(change: RuleChange, *allowed: str) -> None:
    if change.status in allowed:
        return
    if change.status in (ChangeStatus.APPLIED, ChangeStatus.ROLLED_BACK):
        raise ValidationError(
            _("Change #%(id)d was already applied.") % {"id": change.pk}, code="applied"
        )
    raise ValidationError(
        _("Change #%(id)d is %(status)s.")
        % {"id": change.pk, "status": change.get_status_display().lower()},
        code="status",
    )


@transaction.atomic
def rule_change_approve(
    *, change: RuleChange, user: User, note: str = "", now: dt.datetime | None = None
) -> RuleChange:
    change = _lock(change)
    _require_status(change, ChangeStatus.PROPOSED)
    problem = approval_problem(change=change, user=user)
    if problem:
        raise PermissionDenied(problem)
    change.status = ChangeStatus.APPROVED
    change.approved_by = user
    change.approved_at = now or timezone.now()
    _save(change, user=user, reason=(note or "").strip() or _("Approved"))
    return change


@transaction.atomic
def rule_change_reject(
    *, change: RuleChange, user: User, note: str, now: dt.datetime | None = None
) -> RuleChange:
    note = (note or "").strip()
    if not note:
        raise ValidationError({"note": _("Say why the change is rejected.")})
    change = _lock(change)
    _require_status(change, ChangeStatus.PROPOSED, ChangeStatus.APPROVED)
    problem = approval_problem(change=change, user=user)
    if problem:
        raise PermissionDenied(problem)
    change.status = ChangeStatus.REJECTED
    change.closed_by = user
    change.closed_at = now or timezone.now()
    change.close_note = note
    _save(change, user=user, reason=note)
    return change


@transaction.atomic
def rule_change_withdraw(
    *, change: RuleChange, user: User, note: str = "", now: dt.datetime | None = None
) -> RuleChange:
    change = _lock(change)
    _require_status(change, ChangeStatus.DRAFT, ChangeStatus.PROPOSED, ChangeStatus.APPROVED)
    if user.pk not in (change.author_id, change.proposed_by_id) and not user.is_ops:
        raise PermissionDenied(_("Only the author or ops may withdraw this change."))
    change.status = ChangeStatus.WITHDRAWN
    change.closed_by = user
    change.closed_at = now or timezone.now()
    change.close_note = (note or "").strip()
    _save(change, user=user, reason=change.close_note or _("Withdrawn"))
    return change


# --- applying -------------------------------------------------------------------------------


def _apply_edits(change: RuleChange, *, user: User) -> None:
    """Write every edit through its rule kind's service; history rows name the change."""
    groups: dict[tuple[type[models.Model], int], list[RuleEdit]] = {}
    for edit in change.edits.select_related("content_type").order_by("pk"):
        model = edit.content_type.model_class()
        assert model is not None
        groups.setdefault((model, edit.object_id), []).append(edit)
    token = applying_change.set(change.pk)
    try:
        for (model, object_id), edits in groups.items():
            obj = model._default_manager.filter(pk=object_id).first()
            if obj is None:
                raise ValidationError(
                    _("%(kind)s #%(id)d no longer exists.")
                    % {"kind": model._meta.verbose_name, "id": object_id}
                )
            _apply_object_edits(obj, edits, user=user, reason=change.reason)
    finally:
        applying_change.reset(token)


def _apply_object_edits(
    obj: models.Model, edits: list[RuleEdit], *, user: User, reason: str
) -> None:
    model = type(obj)
    data = {
        edit.field: value_from_json(model, edit.field, edit.new_value)
        for edit in edits
        if edit.key is None
    }
    if data:
        if isinstance(obj, Quota):
            quota_update(quota=obj, user=user, reason=reason, data=data)
        elif isinstance(obj, PriorityTier):
            tier_update(tier=obj, user=user, reason=reason, data=data)
        elif isinstance(obj, PreemptionClass):
            preemption_class_update(preemption_class=obj, user=user, reason=reason, data=data)
        elif isinstance(obj, GpuFlavor):
            flavor_update(flavor=obj, user=user, reason=reason, data=data)
        elif isinstance(obj, Pool):
            pool_update(pool=obj, user=user, reason=reason, data=data)
        elif isinstance(obj, Project):
            project_update(project=obj, user=user, reason=reason, data=data)
    for edit in edits:
        if edit.key is None:
            continue
        if isinstance(obj, Pool) and edit.field == CAPACITY:
            pool_capacity_set(
                pool=obj,
                flavor=GpuFlavor.objects.get(pk=edit.key),
                gpus=int(edit.new_value or 0),
                user=user,
                reason=reason,
            )
        elif isinstance(obj, Project) and edit.field == MEMBERSHIP:
            if edit.new_value is None:
                membership = Membership.objects.filter(project=obj, user_id=edit.key).first()
                if membership is not None:
                    membership_remove(membership=membership, user=user, reason=reason)
            else:
                membership_set(
                    project=obj,
                    member=User.objects.get(pk=edit.key),
                    role=edit.new_value,
                    user=user,
                    reason=reason,
                )


@transaction.atomic
def rule_change_apply(
    *, change: RuleChange, user: User, now: dt.datetime | None = None
) -> RuleChange:
    """Approved → applied: every edit in one transaction, or none.

    The change row is locked first, so of two operators applying at once one applies and
    the other is told that the change was already applied. An edit whose field was changed
    by someone else since the proposal is not overwritten: the change is refused.
    """
    if not user.is_ops:
        raise PermissionDenied(_("Only ops may apply a rule change."))
    change = _lock(change)
    _require_status(change, ChangeStatus.APPROVED)
    stale = stale_edits(change=change)
    if stale:
        raise ValidationError(
            _(
                "The rules changed since this change was proposed (%(fields)s): it would "
                "overwrite a later edit. Withdraw it and propose it again."
            )
            % {
                "fields": ", ".join(
                    f"{edit.content_type.name} #{edit.object_id} {edit.field}"
                    for edit, _now in stale
                )
            },
            code="stale",
        )
    _apply_edits(change, user=user)
    change.status = ChangeStatus.APPLIED
    change.applied_by = user
    change.applied_at = now or timezone.now()
    _save(change, user=user, reason=_("Applied"))
    if change.rollback_of is not None:
        original = _lock(change.rollback_of)
        original.status = ChangeStatus.ROLLED_BACK
        _save(
            original,
            user=user,
            reason=_("Rolled back by change #%(id)d") % {"id": change.pk},
        )
    rules_revision_create(
        trigger=RevisionTrigger.RULE_CHANGE,
        note=_("Change #%(id)d: %(title)s") % {"id": change.pk, "title": change.title},
        user=user,
    )
    return change


def _edit_name(edit: RuleEdit) -> str:
    return f"{edit.content_type.name} #{edit.object_id} {edit.field}"


# --- rolling back ---------------------------------------------------------------------------


@transaction.atomic
def rule_change_rollback(
    *,
    change: RuleChange,
    user: User,
    reason: str,
    choices: dict[int, str] | None = None,
    title: str = "",
    ticket: str = "",
    confirmation_reason: str = "",
    now: dt.datetime | None = None,
) -> RuleChange:
    """Propose a new change that restores the fields ``change`` touched to their values
    before it. A field that a later change touched since is a conflict: ``choices`` must
    say, per edit id, whether to keep the current value or restore the old one."""
    change = _lock(change)
    if change.status != ChangeStatus.APPLIED:
        raise ValidationError(
            _("Only an applied change can be rolled back; change #%(id)d is %(status)s.")
            % {"id": change.pk, "status": change.get_status_display().lower()}
        )
    pending = change.rollbacks.filter(
        status__in=[ChangeStatus.DRAFT, ChangeStatus.PROPOSED, ChangeStatus.APPROVED]
    ).first()
    if pending is not None:
        raise ValidationError(
            _("Change #%(id)d already proposes to roll it back.") % {"id": pending.pk}
        )
    choices = choices or {}
    specs: list[EditSpec] = []
    undecided: list[str] = []
    for item in rollback_items(change=change):
        if not item.needed:
            continue
        if item.conflict:
            choice = choices.get(item.edit.pk)
            if choice == KEEP:
                continue
            if choice != RESTORE:
                undecided.append(str(item.edit.pk))
                continue
        specs.append(_restore_spec(item.edit))
    if undecided:
        raise ValidationError(
            {
                "choices": _(
                    "A later change touched these fields since: choose, field by field, "
                    "whether to keep the current value or restore the old one."
                )
            },
            code="conflict",
        )
    if not specs:
        raise ValidationError(_("Nothing to roll back: every field already has its old value."))
    return rule_change_create(
        user=user,
        reason=reason,
        edits=specs,
        title=title or _("Roll back #%(id)d: %(title)s") % {"id": change.pk, "title": change.title},
        ticket=ticket or change.ticket,
        observation_days=change.observation_days,
        rollback_condition=_(
            "Roll this rollback back if the reason for change #%(id)d holds again."
        )
        % {"id": change.pk},
        confirmation_reason=confirmation_reason,
        rollback_of=change,
        now=now,
    )


def _restore_spec(edit: RuleEdit) -> EditSpec:
    model = edit.content_type.model_class()
    assert model is not None
    target = model._default_manager.get(pk=edit.object_id)
    key_model = KEYED.get((model, edit.field))
    key = key_model._default_manager.get(pk=edit.key) if key_model is not None else None
    if key_model is not None:
        value = edit.old_value
    else:
        value = value_from_json(model, edit.field, edit.old_value)
    return EditSpec(target=target, field=edit.field, value=value, key=key)
