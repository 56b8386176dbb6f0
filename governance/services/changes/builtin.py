"""Creating and deleting the built-in rules (projects, flavors, pools, tiers, preemption
classes, quotas) through a rule change, as the API proposes them: an edit of the
``exists`` pseudo-field, as for the kinds other apps register (see ``registry``).

A creation records the arguments of the kind's create service (its snapshot); applying it
calls that service. A deletion is refused while anything else still refers to the object
(members, quotas, capacity, projects on a tier, ...): those are removed first, each with
its own change, so no row disappears without its own history and reason.
"""

import inspect
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models.deletion import Collector, ProtectedError, RestrictedError
from django.utils.translation import gettext as _

from governance.models import (
    EditKind,
    GpuFlavor,
    Pool,
    PreemptionClass,
    PriorityTier,
    Project,
    Quota,
    User,
)
from governance.selectors.changes import values

from .._access import require_ops
from .._history import governed_delete
from ..flavors import flavor_create
from ..pools import pool_create
from ..preemption import preemption_class_create
from ..projects import project_create
from ..quotas import quota_create
from ..tiers import tier_create
from .spec import EDITABLE, EXISTS

# The create service of each built-in rule, and the edit kind its creation or deletion is.
BUILTIN_CREATE: dict[type[models.Model], tuple[Callable[..., models.Model], EditKind]] = {
    Project: (project_create, EditKind.DESCRIPTION),
    GpuFlavor: (flavor_create, EditKind.PLACEMENT),
    Pool: (pool_create, EditKind.CAPACITY),
    PriorityTier: (tier_create, EditKind.PRIORITY),
    PreemptionClass: (preemption_class_create, EditKind.PREEMPTION),
    Quota: (quota_create, EditKind.QUOTA),
}


def create_fields(model: type[models.Model]) -> tuple[str, ...]:
    """The fields a creation of ``model`` records: its create service's arguments."""
    create, _kind = BUILTIN_CREATE[model]
    return tuple(
        name for name in inspect.signature(create).parameters if name not in ("user", "reason")
    )


def create_required_fields(model: type[models.Model]) -> tuple[str, ...]:
    create, _kind = BUILTIN_CREATE[model]
    return tuple(
        name
        for name, parameter in inspect.signature(create).parameters.items()
        if name not in ("user", "reason") and parameter.default is inspect.Parameter.empty
    )


for _model, (_create, _kind) in BUILTIN_CREATE.items():
    EDITABLE[_model][EXISTS] = _kind
    values.SNAPSHOT_FIELDS[_model] = create_fields(_model)


def builtin_object_create(
    *, model: type[models.Model], user: User, reason: str, data: dict[str, Any]
) -> models.Model:
    """Create a built-in rule from a creation's snapshot (values as the service takes them)."""
    create, _kind = BUILTIN_CREATE[model]
    fields = set(create_fields(model))
    return create(
        user=user, reason=reason, **{name: v for name, v in data.items() if name in fields}
    )


@transaction.atomic
def builtin_object_delete(*, obj: models.Model, user: User, reason: str) -> None:
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


def _still_used(obj: models.Model, used_by: list[str]) -> ValidationError:
    return ValidationError(
        {
            EXISTS: _("“%(object)s” is still used (%(used)s): change or remove those first.")
            % {"object": obj, "used": ", ".join(used_by)}
        }
    )
