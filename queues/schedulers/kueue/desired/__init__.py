"""Compiling the effective rules into Kubernetes and Kueue objects (plain manifests).

- ``objects``: the manifests one rule compiles to (a tier's priority classes, a flavor, a
  queue's names, preemption and fair share) and ``DesiredObjects``, which collects them;
- ``policies``: the admission policies of the managed namespaces (a project's tiers, GPUs
  only through Kueue);
- ``cluster``: ``desired_objects``, the whole desired state of one cluster;
- ``fields``: the flattened fields of the bulk kinds (queues, namespaces, tier policies),
  made with their manifests, which the plan takes as they are (``DesiredObjects.state``).

Every public name is importable from here, as it was from the single module it was.
"""

from .cluster import PoolProjects, desired_objects
from .objects import (
    DEFAULT_LOCAL_QUEUE,
    DesiredObjects,
    Manifest,
    cluster_queue_name,
    fair_share_weight,
    flavor_object,
    namespace_for,
    preemption,
    tier_objects,
)
from .policies import (
    ADMISSION_GATE,
    GPU_POLICY,
    JOB_CONTROLLERS,
    MANAGED_LABEL,
    SUSPENDED_BY_PARENT,
    TIER_LABEL,
    WORKLOAD_RESOURCES,
    gpu_policy,
    tier_policy,
)

__all__ = [
    "ADMISSION_GATE",
    "DEFAULT_LOCAL_QUEUE",
    "GPU_POLICY",
    "JOB_CONTROLLERS",
    "MANAGED_LABEL",
    "SUSPENDED_BY_PARENT",
    "TIER_LABEL",
    "WORKLOAD_RESOURCES",
    "DesiredObjects",
    "Manifest",
    "PoolProjects",
    "cluster_queue_name",
    "desired_objects",
    "fair_share_weight",
    "flavor_object",
    "gpu_policy",
    "namespace_for",
    "preemption",
    "tier_objects",
    "tier_policy",
]
