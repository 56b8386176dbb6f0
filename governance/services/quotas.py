from datetime import date
from typing import Any

from django.db import transaction
from django.utils import timezone

from governance.models import GpuFlavor, Pool, PreemptionClass, Project, Quota, User

from ._access import require_ops
from ._history import apply_fields, governed_save
from .pools import pools_check_fit, pools_lock

QUOTA_EDITABLE = (
    "guarantee",
    "borrow_limit",
    "lending_limit",
    "fair_share_weight",
    "reclaim_grace_minutes",
    "preemption_class",
    # Not a scheduling rule, but a rule all the same: changed through a change (at a review).
    "review_cycle_days",
)


@transaction.atomic
def quota_create(
    *,
    user: User,
    reason: str,
    project: Project,
    pool: Pool,
    flavor: GpuFlavor,
    guarantee: int,
    preemption_class: PreemptionClass,
    borrow_limit: int | None = None,
    lending_limit: int | None = None,
    fair_share_weight: int = 1,
    reclaim_grace_minutes: int = 0,
    review_cycle_days: int = 180,
    last_reviewed_on: date | None = None,
) -> Quota:
    require_ops(user)
    pools_lock(pool)
    quota = Quota(
        project=project,
        pool=pool,
        flavor=flavor,
        guarantee=guarantee,
        borrow_limit=borrow_limit,
        lending_limit=lending_limit,
        fair_share_weight=fair_share_weight,
        reclaim_grace_minutes=reclaim_grace_minutes,
        preemption_class=preemption_class,
        review_cycle_days=review_cycle_days,
        last_reviewed_on=last_reviewed_on,
    )
    quota.next_review_on = quota.review_due_from(last_reviewed_on or timezone.localdate())
    governed_save(quota, user=user, reason=reason)
    pools_check_fit(field="guarantee", checks=[(pool, flavor)])
    return quota


@transaction.atomic
def quota_update(*, quota: Quota, user: User, reason: str, data: dict[str, Any]) -> Quota:
    require_ops(user)
    pools_lock(quota.pool_id)
    quota = Quota.objects.select_related("pool", "flavor").get(pk=quota.pk)
    if apply_fields(quota, data, QUOTA_EDITABLE):
        governed_save(quota, user=user, reason=reason)
        pools_check_fit(field="guarantee", checks=[(quota.pool, quota.flavor)])
    return quota
