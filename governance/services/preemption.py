from typing import Any

from django.db import transaction

from governance.models import PreemptionClass, User

from ._access import require_ops
from ._history import apply_fields, governed_save

PREEMPTION_CLASS_EDITABLE = (
    "name",
    "kind",
    "requires_verified_checkpoint",
    "max_checkpoint_interval_minutes",
    "min_runtime_minutes",
    "max_preemptions_per_day",
    "recovery_owner",
    "business_impact",
)


@transaction.atomic
def preemption_class_create(
    *,
    user: User,
    reason: str,
    slug: str,
    name: str,
    kind: str,
    business_impact: str,
    requires_verified_checkpoint: bool = False,
    max_checkpoint_interval_minutes: int | None = None,
    min_runtime_minutes: int | None = None,
    max_preemptions_per_day: int | None = None,
    recovery_owner: User | None = None,
) -> PreemptionClass:
    require_ops(user)
    preemption_class = PreemptionClass(
        slug=slug,
        name=name,
        kind=kind,
        business_impact=business_impact,
        requires_verified_checkpoint=requires_verified_checkpoint,
        max_checkpoint_interval_minutes=max_checkpoint_interval_minutes,
        min_runtime_minutes=min_runtime_minutes,
        max_preemptions_per_day=max_preemptions_per_day,
        recovery_owner=recovery_owner,
    )
    governed_save(preemption_class, user=user, reason=reason)
    return preemption_class


@transaction.atomic
def preemption_class_update(
    *, preemption_class: PreemptionClass, user: User, reason: str, data: dict[str, Any]
) -> PreemptionClass:
    require_ops(user)
    preemption_class = PreemptionClass.objects.select_for_update().get(pk=preemption_class.pk)
    if apply_fields(preemption_class, data, PREEMPTION_CLASS_EDITABLE):
        governed_save(preemption_class, user=user, reason=reason)
    return preemption_class
