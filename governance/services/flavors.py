from typing import Any

from django.db import transaction

from governance.models import GpuFlavor, User

from ._access import require_ops
from ._history import apply_fields, governed_save

FLAVOR_EDITABLE = ("name", "gpu_model", "memory_gb", "gres_type", "node_labels", "node_taints")


@transaction.atomic
def flavor_create(
    *,
    user: User,
    reason: str,
    slug: str,
    name: str,
    gpu_model: str,
    memory_gb: int,
    gres_type: str = "",
    node_labels: dict[str, str] | None = None,
    node_taints: list[dict[str, str]] | None = None,
) -> GpuFlavor:
    require_ops(user)
    flavor = GpuFlavor(
        slug=slug,
        name=name,
        gpu_model=gpu_model,
        memory_gb=memory_gb,
        gres_type=gres_type,
        node_labels=node_labels or {},
        node_taints=node_taints or [],
    )
    governed_save(flavor, user=user, reason=reason)
    return flavor


@transaction.atomic
def flavor_update(*, flavor: GpuFlavor, user: User, reason: str, data: dict[str, Any]) -> GpuFlavor:
    require_ops(user)
    flavor = GpuFlavor.objects.select_for_update().get(pk=flavor.pk)
    if apply_fields(flavor, data, FLAVOR_EDITABLE):
        governed_save(flavor, user=user, reason=reason)
    return flavor
