"""Where a placement answer sends a job: the Slurm account, partition and QOS, or the Kueue
queue and priority class, with the labels and resources the job must carry."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from governance.models import (
    GpuFlavor,
    PreemptionClass,
    PreemptionKind,
    PriorityTier,
)
from governance.selectors import (
    EffectiveQuota,
)
from queues.schedulers.kueue.desired import cluster_queue_name
from queues.schedulers.slurm.values import guarantee_qos, project_account, tier_qos

from .compiled import Compiled

PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
GPU_RESOURCE = "nvidia.com/gpu"


def _routes(
    compiled: Compiled,
    slug: str,
    tier: PriorityTier | None,
    flavor: GpuFlavor | None,
    quotas: list[EffectiveQuota],
    gpus: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    by_pool: dict[int, list[EffectiveQuota]] = defaultdict(list)
    for quota in quotas:
        by_pool[quota.quota.pool_id].append(quota)
    slurm: list[dict[str, Any]] = []
    if flavor is None:
        return slurm, []
    gres = f"gpu:{flavor.gres_type}:{gpus}" if flavor.gres_type else f"gpu:{gpus}"
    for target in compiled.slurm:
        for pool in target.pools:
            pool_quotas = by_pool.get(pool.pk)
            if not pool_quotas:
                continue
            account = project_account(pool, slug)
            if account not in target.accounts:
                continue
            forbidden = any(
                _kind(q.preemption_class) == PreemptionKind.FORBIDDEN for q in pool_quotas
            )
            qos = tier_qos(tier, protected=forbidden) if tier is not None else ""
            if qos and qos not in target.qos:
                qos = ""
            association_qos, default_qos = target.associations.get(account, ([], ""))
            guarantee = guarantee_qos(pool, slug)
            partition = target.cluster.slurm_partition
            options = [f"--account={account}"]
            if partition:
                options.append(f"--partition={partition}")
            if qos:
                options.append(f"--qos={qos}")
            options.append(f"--gres={gres}")
            slurm.append(
                {
                    "cluster": target.cluster.name,
                    "slurm_cluster": target.cluster.slurm_cluster,
                    "pool": pool.slug,
                    "account": account,
                    "qos": qos or None,
                    "partition": partition or None,
                    "gres": gres,
                    "guarantee_qos": guarantee if guarantee in target.qos else None,
                    "borrow_qos": [
                        name for name in association_qos if name.startswith(f"{pool.slug}.borrow")
                    ],
                    "default_qos": default_qos or None,
                    "sbatch_options": options,
                    "sbatch": " ".join(options),
                }
            )
    kueue = _kueue_routes(compiled, slug, tier, flavor, by_pool, gpus)
    return slurm, kueue


def _kueue_routes(
    compiled: Compiled,
    slug: str,
    tier: PriorityTier | None,
    flavor: GpuFlavor,
    by_pool: dict[int, list[EffectiveQuota]],
    gpus: int,
) -> list[dict[str, Any]]:
    """Per Kueue cluster and pool of the project's quotas: its LocalQueue and labels."""
    kueue: list[dict[str, Any]] = []
    for kube in compiled.kueue:
        for pool in kube.pools:
            if not by_pool.get(pool.pk):
                continue
            found = kube.local_queues.get(cluster_queue_name(slug, pool.slug))
            if found is None:
                continue
            namespace, local_queue = found
            labels = {QUEUE_NAME_LABEL: local_queue}
            priority_class = kube.priority_classes.get(tier.slug) if tier else None
            if priority_class:
                labels[PRIORITY_CLASS_LABEL] = priority_class
            kueue.append(
                {
                    "cluster": kube.cluster.name,
                    "pool": pool.slug,
                    "namespace": namespace,
                    "local_queue": local_queue,
                    "cluster_queue": cluster_queue_name(slug, pool.slug),
                    "priority_class": priority_class,
                    "labels": labels,
                    "resources": {GPU_RESOURCE: str(gpus)},
                    "node_selector": {
                        str(k): str(v) for k, v in sorted((flavor.node_labels or {}).items())
                    },
                }
            )
    return kueue


def _kind(klass: PreemptionClass) -> str:
    return str(klass.kind)
