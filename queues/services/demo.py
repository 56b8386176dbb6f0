"""The demo's clusters: which scheduler serves each of its pools.

Two clusters, as a site with both schedulers has them: the training pool on Kubernetes with
Kueue (``training-kueue``), the inference pool on Slurm (``inference-slurm``). The demo's
job history (``workload.demo``) records each job on the cluster of its pool, in its
scheduler's words, so a change's what-if replay runs each cluster's jobs through the model of
its scheduler (``queues.replay.by_cluster``): the training jobs through the Kueue model, the
inference jobs through the Slurm model, with Slurm's defaults (the cluster names no
``slurm.conf``, so the replay reads none).

Neither is a real scheduler, and nothing tries to reach one: both are created **disabled**.
Every path that talks to a scheduler — the sync after a rule change, the periodic sync,
drift check, guard, out-of-sync alert, workload collection and Kueue enforcer of the beat,
and a job page's live answer — takes enabled clusters only, and reading a cluster page runs
no command. The Kueue cluster's API server is under ``.invalid`` (a name that never
resolves) and its credentials file does not exist: **Check now** on its page says so.
Enabling a demo cluster is a rule change like any other, which then checks the credentials
file; to sync the demo's rules to a lab, point a cluster at it (README).

Created through the services as ``ops`` with the demo's reason, like the rest of the demo,
dated with the organisation (90 days ago); idempotent: an existing cluster of that name is
left as it is.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from governance.models import Pool, User
from governance.services import governed_save
from governance.services.demo import DEMO_REASON, demo_lock
from governance.services.demo.clock import clock_at
from queues.models import Cluster, ClusterBackend, ClusterSyncState, WaitCategory
from queues.replay.engine import REASON_CATEGORY
from queues.replay.engine.vocabulary import (
    JOB_CAP,
    LENDING,
    PRIORITY,
    PROJECT_MAX,
    RESOURCES,
    TIER_CAP,
)

from .clusters import cluster_create

SET_UP_DAYS_AGO = 90

# name, the pools it serves, its settings (disabled: see above).
DEMO_CLUSTERS: list[tuple[str, tuple[str, ...], dict[str, Any]]] = [
    (
        "training-kueue",
        ("training",),
        {
            "backend": ClusterBackend.KUEUE,
            "kube_api_server": "https://kube.training.demo.invalid:6443",
            "kube_credentials_file": "demo-training-token",
            "kube_namespace_template": "{project}",
        },
    ),
    (
        "inference-slurm",
        ("inference",),
        # No slurm.conf path: the replay models Slurm's defaults (``adapt.scheduler_model``).
        {"backend": ClusterBackend.SLURM, "slurm_cluster": "inference"},
    ),
]


def demo_clusters_ensure(*, now: datetime | None = None) -> dict[str, Cluster]:
    """The demo's clusters (created when missing, disabled); every demo cluster by name."""
    with transaction.atomic():
        demo_lock()
        return _ensure(now=now or timezone.now())


def _ensure(*, now: datetime) -> dict[str, Cluster]:
    names = [name for name, _pools, _settings in DEMO_CLUSTERS]
    found = {cluster.name: cluster for cluster in Cluster.objects.filter(name__in=names)}
    ops = User.objects.filter(username="ops").first()
    pools = {pool.slug: pool for pool in Pool.objects.all()}
    for name, pool_slugs, settings in DEMO_CLUSTERS:
        if name in found or ops is None or not set(pool_slugs) <= set(pools):
            continue
        served = [pools[slug] for slug in pool_slugs]
        with clock_at(now - timedelta(days=SET_UP_DAYS_AGO)):
            found[name] = _create(name=name, user=ops, pools=served, settings=settings)
    return found


def _create(*, name: str, user: User, pools: list[Pool], settings: dict[str, Any]) -> Cluster:
    settings = dict(settings, enabled=False)
    backend = settings.pop("backend")
    if backend == ClusterBackend.SLURM:
        return cluster_create(
            user=user, reason=DEMO_REASON, name=name, backend=backend, pools=pools, **settings
        )
    # A Kueue cluster's creation checks that its credentials file exists in the deployer's
    # directory; the demo's names none that does (it is never reached), so it is saved as
    # ``cluster_create`` saves one, without that check. Enabling it checks it.
    cluster = Cluster(name=name, backend=backend, **settings)
    governed_save(cluster, user=user, reason=DEMO_REASON)
    cluster.pools.set(pools)
    ClusterSyncState.objects.create(cluster=cluster)
    return cluster


# --- a wait in the words of the job's scheduler ------------------------------------------------
# The demo's history is replayed by the engine, which says why a job waits in Slurm's reason
# codes. A job of the Kueue cluster records what Kueue 0.17 says of its Workload instead (the
# condition's reason and message), with the engine's category: Kueue names no priority wait
# of its own (a Workload behind higher-priority ones waits for unused quota like one the
# cohort has no room for) and Arbiter's enforcer holds work past a tier's GPU caps
# (``spec.active: false``: Deactivated). Kueue knows no dependency between jobs (a workflow
# creates the next one when the first ends), so the waits no rule decides are on Slurm. A
# per-user cap is held by neither Kueue nor the enforcer: the demo's tiers set none, so the
# engine never waits on one (an unmapped token would be recorded as the engine said it).
QUOTA_WAIT = (
    "Pending",
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
    "in flavor {flavor}, {gpus} more needed",
)
HELD = ("Deactivated", "The workload is deactivated")
KUEUE_WORDS = {
    RESOURCES: QUOTA_WAIT,
    PRIORITY: QUOTA_WAIT,
    PROJECT_MAX: QUOTA_WAIT,
    LENDING: QUOTA_WAIT,
    TIER_CAP: HELD,
    JOB_CAP: HELD,
    "BadConstraints": (
        "NoMatchingFlavor",
        "couldn't assign flavors to pod set main: flavor {flavor} doesn't match node affinity",
    ),
}
KUEUE_CATEGORY = {"BadConstraints": WaitCategory.PLACEMENT}


def demo_wait(*, scheduler: str, token: str, flavor: str, gpus: float) -> dict[str, Any]:
    """The fields of a pending event of the engine's reason ``token`` in ``scheduler``'s words:
    Slurm's is the token itself; Kueue's its Workload condition, with the engine's category."""
    if scheduler != ClusterBackend.KUEUE or token not in KUEUE_WORDS:
        return {"reason": token}
    reason, message = KUEUE_WORDS[token]
    category = KUEUE_CATEGORY.get(token) or WaitCategory(REASON_CATEGORY[token])
    return {
        "reason": reason,
        "message": message.format(flavor=flavor, gpus=f"{gpus:g}"),
        "category": category,
    }


def demo_clusters_by_pool() -> dict[str, Cluster]:
    """The demo cluster serving each pool (by the pool's slug)."""
    names = [name for name, _pools, _settings in DEMO_CLUSTERS]
    return {
        pool.slug: cluster
        for cluster in Cluster.objects.filter(name__in=names).prefetch_related("pools")
        for pool in cluster.pools.all()
    }
