from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Sum
from django.utils.translation import gettext as _

from governance.models import GpuFlavor, Pool, PoolCapacity, Quota, User

from ._access import require_ops
from ._history import apply_fields, governed_save

POOL_EDITABLE = ("name", "description", "parent")


def pools_lock(*pools: Pool | int | None) -> None:
    """Lock pool rows (in id order, so that two writers never deadlock).

    Every write that changes what a pool holds or owes (capacity, guarantees, the
    hierarchy) takes this lock first, so the sums checked below cannot race.
    """
    ids = sorted({pool.pk if isinstance(pool, Pool) else pool for pool in pools if pool})
    list(Pool.objects.select_for_update().filter(pk__in=ids).order_by("pk").values_list("pk"))


def pool_overcommit_message(*, pool: Pool, flavor: GpuFlavor) -> str | None:
    """Say how ``pool`` is overcommitted for ``flavor``, or ``None`` when it fits.

    A pool must hold the guarantees of its quotas plus the capacity of its child pools.
    """
    capacity = (
        PoolCapacity.objects.filter(pool=pool, flavor=flavor).values_list("gpus", flat=True).first()
    ) or 0
    guaranteed = (
        Quota.objects.filter(pool=pool, flavor=flavor).aggregate(total=Sum("guarantee"))["total"]
        or 0
    )
    children = (
        PoolCapacity.objects.filter(pool__parent=pool, flavor=flavor).aggregate(total=Sum("gpus"))[
            "total"
        ]
        or 0
    )
    if guaranteed + children <= capacity:
        return None
    values = {
        "pool": pool.name,
        "flavor": flavor.name,
        "capacity": capacity,
        "guaranteed": guaranteed,
        "children": children,
        "needed": guaranteed + children,
    }
    if children:
        return (
            _(
                "Pool “%(pool)s” has %(capacity)d %(flavor)s GPUs, but its guarantees "
                "(%(guaranteed)d) and its child pools (%(children)d) need %(needed)d."
            )
            % values
        )
    return (
        _(
            "Pool “%(pool)s” has %(capacity)d %(flavor)s GPUs, but the guarantees in it "
            "would add up to %(guaranteed)d."
        )
        % values
    )


def pools_check_fit(*, field: str, checks: list[tuple[Pool | None, GpuFlavor]]) -> None:
    messages = [
        message
        for pool, flavor in checks
        if pool is not None
        and (message := pool_overcommit_message(pool=pool, flavor=flavor)) is not None
    ]
    if messages:
        raise ValidationError({field: messages})


@transaction.atomic
def pool_create(
    *,
    user: User,
    reason: str,
    slug: str,
    name: str,
    description: str = "",
    parent: Pool | None = None,
) -> Pool:
    require_ops(user)
    pool = Pool(slug=slug, name=name, description=description, parent=parent)
    governed_save(pool, user=user, reason=reason)
    return pool


@transaction.atomic
def pool_update(*, pool: Pool, user: User, reason: str, data: dict[str, Any]) -> Pool:
    require_ops(user)
    old_parent_id = Pool.objects.values_list("parent_id", flat=True).get(pk=pool.pk)
    pools_lock(pool, old_parent_id, data.get("parent"))
    pool = Pool.objects.select_related("parent").get(pk=pool.pk)
    if not apply_fields(pool, data, POOL_EDITABLE):
        return pool
    ancestor = pool.parent
    while ancestor is not None:
        if ancestor.pk == pool.pk:
            raise ValidationError(
                {"parent": _("A pool cannot sit inside itself or inside one of its children.")}
            )
        ancestor = ancestor.parent
    governed_save(pool, user=user, reason=reason)
    flavors = GpuFlavor.objects.filter(capacities__pool=pool)
    pools_check_fit(field="parent", checks=[(pool.parent, flavor) for flavor in flavors])
    return pool


@transaction.atomic
def pool_capacity_set(
    *, pool: Pool, flavor: GpuFlavor, gpus: int, user: User, reason: str
) -> PoolCapacity:
    """Set how many GPUs of ``flavor`` the pool holds (creating the row if needed)."""
    require_ops(user)
    parent_id = Pool.objects.values_list("parent_id", flat=True).get(pk=pool.pk)
    pools_lock(pool, parent_id)
    pool = Pool.objects.select_related("parent").get(pk=pool.pk)
    capacity = PoolCapacity.objects.filter(pool=pool, flavor=flavor).first()
    if capacity is None:
        capacity = PoolCapacity(pool=pool, flavor=flavor, gpus=gpus)
    elif capacity.gpus == gpus:
        return capacity
    capacity.gpus = gpus
    governed_save(capacity, user=user, reason=reason)
    pools_check_fit(field="gpus", checks=[(pool, flavor), (pool.parent, flavor)])
    return capacity
