"""The built-in rule kinds, each declared once: projects, GPU flavors, pools, priority tiers,
preemption classes, quotas and people.

A declaration names the model, the fields a change may edit (the update service's own list,
with the kind of edit each is), its keyed fields, its create service (whose keyword
arguments are what a creation records), how a deletion is checked, and who besides ops
proposes and approves it. ``GovernanceConfig.ready()`` registers ``BUILTIN_KINDS`` in this
order, as ``QueuesConfig.ready()`` registers clusters; see ``selectors.changes.kinds`` and
docs/rule-kinds.md for adding one.

A deletion of a built-in rule is refused while anything else still refers to the object
(members, quotas, capacity, projects on a tier, ...): those are removed first, each with
its own change, so no row disappears without its own history and reason.
"""

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Q
from django.db.models.deletion import Collector, ProtectedError, RestrictedError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop

from governance.models import (
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
    User,
)
from governance.selectors.changes import EXISTS, HistorySection, KeyedField, RuleKind
from governance.selectors.history import capacity_history_entries, membership_history_entries

from .._access import require_ops
from .._history import governed_delete
from ..flavors import FLAVOR_EDITABLE, flavor_create, flavor_update
from ..people import USER_EDITABLE, user_access_update
from ..pools import POOL_EDITABLE, pool_capacity_set, pool_create, pool_update
from ..preemption import (
    PREEMPTION_CLASS_EDITABLE,
    preemption_class_create,
    preemption_class_update,
)
from ..projects import (
    PROJECT_EDITABLE,
    membership_remove,
    membership_set,
    project_create,
    project_update,
)
from ..quotas import QUOTA_EDITABLE, quota_create, quota_update
from ..tiers import TIER_EDITABLE, tier_create, tier_update

CAPACITY = "capacity"  # keyed field of a pool: GPUs per flavor (key: the flavor id)
MEMBERSHIP = "membership"  # keyed field of a project: a user's role (key: the user id)


def _kinds(fields: Iterable[str], kind: EditKind, **overrides: EditKind) -> dict[str, EditKind]:
    return {name: overrides.get(name, kind) for name in fields}


def _created_by(service: Callable[..., models.Model], kind: EditKind) -> dict[str, Any]:
    """What a kind created by ``service`` declares: a creation records the service's keyword
    arguments (all of them; those without a default are required) and applying it calls the
    service; a deletion deletes the object once nothing refers to it."""
    parameters = {
        name: parameter
        for name, parameter in inspect.signature(service).parameters.items()
        if name not in ("user", "reason")
    }

    def create(*, user: User, reason: str, data: dict[str, Any]) -> models.Model:
        return service(user=user, reason=reason, **data)

    return {
        "create": create,
        "delete": rule_object_delete,
        "exists_kind": kind,
        "snapshot_fields": tuple(parameters),
        "required_fields": tuple(
            name
            for name, parameter in parameters.items()
            if parameter.default is inspect.Parameter.empty
        ),
    }


def _updated_by(service: Callable[..., Any], name: str) -> Callable[..., Any]:
    """The kind's ``update``: ``service`` takes the object as ``name``."""

    def update(*, obj: models.Model, user: User, reason: str, data: dict[str, Any]) -> Any:
        return service(user=user, reason=reason, data=data, **{name: obj})

    return update


@transaction.atomic
def rule_object_delete(*, obj: models.Model, user: User, reason: str) -> None:
    """Delete a built-in rule that nothing refers to any more; otherwise a 400 naming what
    still does."""
    require_ops(user)
    obj = type(obj)._default_manager.select_for_update().get(pk=obj.pk)
    collector = Collector(using="default", origin=obj)
    try:
        collector.collect([obj])
    except (ProtectedError, RestrictedError) as error:
        used_by = sorted({str(type(item)._meta.verbose_name) for item in error.args[1]})
        raise _still_used(obj, used_by) from None
    used_by = sorted(
        {
            str(model._meta.verbose_name)
            for model, items in collector.data.items()
            if any(item != obj for item in items)
        }
        | {
            str(queryset.model._meta.verbose_name)
            for queryset in collector.fast_deletes
            if isinstance(queryset, models.QuerySet) and queryset.exists()
        }
    )
    if used_by:
        raise _still_used(obj, used_by)
    governed_delete(obj, user=user, reason=reason)


def _tier_delete(*, obj: models.Model, user: User, reason: str) -> None:
    """A tier is deleted like any other rule, except the default tier: projects without a
    tier of their own run at it, so another tier must become the default first."""
    if PriorityTier.objects.filter(pk=obj.pk, is_default=True).exists():
        raise _still_used(obj, [_("the default tier of every project without a tier")])
    rule_object_delete(obj=obj, user=user, reason=reason)


def _still_used(obj: models.Model, used_by: list[str]) -> ValidationError:
    return ValidationError(
        {
            EXISTS: _("“%(object)s” is still used (%(used)s): change or remove those first.")
            % {"object": obj, "used": ", ".join(used_by)}
        }
    )


# --- keyed fields ----------------------------------------------------------------------------


def _pool_gpus(pool: Any, flavor_id: int | None) -> int:
    gpus = PoolCapacity.objects.filter(pool=pool, flavor_id=flavor_id).values_list(
        "gpus", flat=True
    )
    return gpus.first() or 0


def _clean_gpus(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValidationError({"gpus": [_("Enter a whole number of GPUs (0 or more).")]})
    return value


def _key_found(model: type[models.Model], key: int, field: str) -> Any:
    """The entry ``key`` of a keyed field, or a 400 on ``field`` when it was deleted since
    the change was proposed."""
    found = model._default_manager.filter(pk=key).first()
    if found is None:
        raise ValidationError(
            {
                field: _("%(kind)s #%(id)s no longer exists.")
                % {"kind": model._meta.verbose_name, "id": key}
            }
        )
    return found


def _capacity_apply(*, obj: Any, key: int, value: Any, user: User, reason: str) -> None:
    flavor = _key_found(GpuFlavor, key, CAPACITY)
    pool_capacity_set(pool=obj, flavor=flavor, gpus=int(value or 0), user=user, reason=reason)


def _member_role(project: Any, user_id: int | None) -> str | None:
    if user_id is None:
        return None
    roles = Membership.objects.filter(project=project, user__pk=user_id)
    return roles.values_list("role", flat=True).first()


def _clean_role(value: Any) -> str | None:
    if value is not None and value not in ProjectRole.values:
        raise ValidationError({"role": [_("Choose a project role.")]})
    return value


def _membership_apply(*, obj: Any, key: int, value: Any, user: User, reason: str) -> None:
    if value is None:
        membership = Membership.objects.filter(project=obj, user_id=key).first()
        if membership is not None:
            membership_remove(membership=membership, user=user, reason=reason)
        return
    member = _key_found(User, key, MEMBERSHIP)
    membership_set(project=obj, member=member, role=value, user=user, reason=reason)


def _role_display(value: Any) -> str:
    return str(ProjectRole(value).label) if value else _("not a member")


def _tier_projects(ids: set[int]) -> Q:
    """The projects at the tiers ``ids`` (and those without a tier, when one is the default)."""
    projects = Q(tier__in=ids)
    if PriorityTier.objects.filter(pk__in=ids, is_default=True).exists():
        projects |= Q(tier__isnull=True)
    return projects


# --- the kinds ---------------------------------------------------------------------------------

PROJECT = RuleKind(
    model=Project,
    object_type="project",
    fields=_kinds(PROJECT_EDITABLE, EditKind.DESCRIPTION, tier=EditKind.PRIORITY),
    update=_updated_by(project_update, "project"),
    keyed={
        MEMBERSHIP: KeyedField(
            key_model=User,
            key_name="user",
            kind=EditKind.ACCESS,
            current=_member_role,
            clean=_clean_role,
            apply=_membership_apply,
            title=gettext_noop("membership of %(user)s"),
            label=gettext_noop("Role of %(user)s"),
            display=_role_display,
            display_empty=True,
            stored_in=Membership,
        )
    },
    affects_projects=lambda ids: Q(pk__in=ids),
    replay_fields=frozenset({"tier"}),
    history_sections=(
        HistorySection(
            name="members",
            title=gettext_lazy("Members"),
            model=Membership,
            entries=lambda obj: membership_history_entries(project=obj),
        ),
    ),
    **_created_by(project_create, EditKind.DESCRIPTION),
)
FLAVOR = RuleKind(
    model=GpuFlavor,
    object_type="flavor",
    fields=_kinds(FLAVOR_EDITABLE, EditKind.PLACEMENT, name=EditKind.DESCRIPTION),
    update=_updated_by(flavor_update, "flavor"),
    affects_quotas=lambda ids: Q(flavor__in=ids),
    plan_pools=lambda ids: PoolCapacity.objects.filter(flavor__in=ids).values_list(
        "pool_id", flat=True
    ),
    **_created_by(flavor_create, EditKind.PLACEMENT),
)
POOL = RuleKind(
    model=Pool,
    object_type="pool",
    fields=_kinds(POOL_EDITABLE, EditKind.DESCRIPTION, parent=EditKind.CAPACITY),
    update=_updated_by(pool_update, "pool"),
    keyed={
        CAPACITY: KeyedField(
            key_model=GpuFlavor,
            key_name="flavor",
            kind=EditKind.CAPACITY,
            current=_pool_gpus,
            clean=_clean_gpus,
            apply=_capacity_apply,
            title=gettext_noop("capacity of %(flavor)s"),
            label=gettext_noop("GPUs of %(flavor)s"),
            stored_in=PoolCapacity,
        )
    },
    affects_quotas=lambda ids: Q(pool__in=ids),
    touches_pools=lambda ids: ids,
    replay_fields=frozenset({CAPACITY}),
    history_sections=(
        HistorySection(
            name="capacity",
            title=gettext_lazy("Capacity"),
            model=PoolCapacity,
            entries=lambda obj: capacity_history_entries(pool=obj),
        ),
    ),
    **_created_by(pool_create, EditKind.CAPACITY),
)
TIER = RuleKind(
    model=PriorityTier,
    object_type="tier",
    fields=_kinds(
        (*TIER_EDITABLE, "preemptible_tiers"),
        EditKind.PRIORITY,
        name=EditKind.DESCRIPTION,
        description=EditKind.DESCRIPTION,
    ),
    update=_updated_by(tier_update, "tier"),
    # A tier's business owner proposes changes of it and approves them (ops approve what
    # the owner proposed).
    owner_field="owner",
    owner_message=gettext_noop(
        "A change to the tier “%(object)s” needs its business owner, %(owner)s (or ops when "
        "the owner proposed it)."
    ),
    affects_projects=_tier_projects,
    # The replay orders by score and applies the caps, preemption and aging.
    replay_fields=frozenset(
        {"score", "max_gpus_per_job", "max_gpus_total", "may_preempt", "preemptible_tiers"}
        | {"aging_after_minutes", "aging_step", "aging_cap"}
    ),
    **{**_created_by(tier_create, EditKind.PRIORITY), "delete": _tier_delete},
)
PREEMPTION_CLASS = RuleKind(
    model=PreemptionClass,
    object_type="preemption_class",
    fields=_kinds(PREEMPTION_CLASS_EDITABLE, EditKind.PREEMPTION, name=EditKind.DESCRIPTION),
    update=_updated_by(preemption_class_update, "preemption_class"),
    affects_quotas=lambda ids: Q(preemption_class__in=ids),
    # What the replay models of a class: its kind, minimum runtime, daily maximum, checkpoints.
    replay_fields=frozenset(PREEMPTION_CLASS_EDITABLE)
    - {"name", "requires_verified_checkpoint", "recovery_owner", "business_impact"},
    **_created_by(preemption_class_create, EditKind.PREEMPTION),
)
QUOTA = RuleKind(
    model=Quota,
    object_type="quota",
    fields=_kinds(
        QUOTA_EDITABLE,
        EditKind.QUOTA,
        preemption_class=EditKind.PREEMPTION,
        review_cycle_days=EditKind.DESCRIPTION,
    ),
    update=_updated_by(quota_update, "quota"),
    key_field="pk",
    name_related=("project", "pool", "flavor"),
    affects_quotas=lambda ids: Q(pk__in=ids),
    touches_pools=lambda ids: Quota.objects.filter(pk__in=ids).values_list("pool_id", flat=True),
    replay_fields=frozenset(QUOTA_EDITABLE) - {"review_cycle_days"},
    **_created_by(quota_create, EditKind.QUOTA),
)
# People: site role, activation and (revoking) superuser status, approved by ops. Accounts
# are made elsewhere (``user_create``) and never deleted through a change.
PERSON = RuleKind(
    model=User,
    object_type="user",
    fields=_kinds(USER_EDITABLE, EditKind.ACCESS),
    update=_updated_by(user_access_update, "person"),
    key_field="username",
    page_name="person",
    history_title=gettext_lazy("Access"),
)

BUILTIN_KINDS = (PROJECT, FLAVOR, POOL, TIER, PREEMPTION_CLASS, QUOTA, PERSON)
