"""The whole desired state of one cluster from the effective rules: its namespaces, queues,
cohorts, flavors, tiers and policies (``desired_objects``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext as _

from governance.models import GpuFlavor, Pool, PreemptionKind, PriorityTier
from governance.selectors import EffectiveProject, EffectiveQuota, EffectiveRules

from ..values import (
    CLUSTER_QUEUE,
    COHORT,
    LOCAL_QUEUE,
    NAMESPACE,
    NAMESPACE_NAME_LABEL,
    PRIORITY_CLASS,
    SOURCE_ANNOTATION,
    k8s_name,
)
from .fields import (
    cluster_queue_fields,
    local_queue_fields,
    namespace_fields,
    tier_policy_fields,
)
from .objects import (
    DEFAULT_LOCAL_QUEUE,
    DesiredObjects,
    Manifest,
    _gpu_group,
    _metadata,
    _object,
    _top_tier,
    cluster_queue_name,
    fair_share_weight,
    flavor_object,
    namespace_for,
    preemption,
    tier_objects,
)
from .policies import gpu_policy, tier_policy


def desired_objects(
    *,
    rules: EffectiveRules,
    pools: Iterable[Pool],
    capacities: dict[tuple[int, int], int],
    namespace_template: str,
    revision: int | None,
    mutating: bool = True,
) -> DesiredObjects:
    """The manifests of one cluster. ``mutating``: the API server serves
    MutatingAdmissionPolicy (``KubeClient.serves``), so a Job without a tier is given its
    project's tier rather than refused (``tier_policy``)."""
    pools = sorted(pools, key=lambda pool: pool.slug)
    out = DesiredObjects()
    if not pools:
        return out

    per_pool, flavors = _projects_per_pool(rules, pools, out)
    _tier_objects(rules, revision, out)
    for flavor in sorted(flavors.values(), key=lambda f: f.slug):
        out.add(flavor_object(flavor, revision), f"flavor {flavor.slug}")
    default = rules.default_tier
    queues = _Queues(
        template=namespace_template,
        revision=revision,
        default=default,
        tiers={tier.pk: tier for tier in rules.tiers},
    )
    for pool in pools:
        guaranteed = queues.add_pool(pool, per_pool[pool.pk])
        _cohort(pool, pools, flavors, capacities, guaranteed, revision, out)
    # Each tier's Kubernetes name, written once (10,000 projects name the same few tiers).
    tier_names = {tier.id: k8s_name(tier.slug) for tier in rules.tiers}
    default_name = k8s_name(default.slug) if default else ""
    for namespace, (slug, project) in sorted(queues.namespace_projects.items()):
        own = _top_tier(project, default, queues.tiers)
        allowed_slugs = {tier_names.get(t.id) or k8s_name(t.slug) for t in project.allowed_tiers}
        own_name = (tier_names.get(own.id) or k8s_name(own.slug)) if own is not None else ""
        if own is not None:
            allowed_slugs.add(own_name)
        allowed = sorted(allowed_slugs)
        source = f"tiers of project {slug}"
        manifests = tier_policy(
            namespace,
            allowed=allowed,
            own=own_name,
            default=default_name,
            source=source,
            revision=revision,
            mutating=mutating,
        )
        made = tier_policy_fields(
            namespace, allowed=allowed, own=own_name, default=default_name, mutating=mutating
        )
        for manifest, fields in zip(manifests, made, strict=True):
            out.add_made(manifest, source, fields)
    if queues.namespaces:
        for manifest in gpu_policy(revision):
            out.add(manifest, manifest["metadata"]["annotations"][SOURCE_ANNOTATION])
    for namespace, source in sorted(queues.namespaces.items()):
        meta = _metadata(namespace, source, revision)
        meta["labels"][NAMESPACE_NAME_LABEL] = namespace
        out.add_made(_object(NAMESPACE, meta), source, namespace_fields())
    for queue, source, paths in queues.queues:
        out.add_made(queue, source, cluster_queue_fields(queue["spec"]), **paths)
    for local_queue, source in queues.local_queues:
        out.add_made(local_queue, source, local_queue_fields(local_queue["spec"]))
    out.sort_by_kind()
    return out


PoolProjects = list[tuple[str, EffectiveProject, list[EffectiveQuota]]]
# Read once: an enum member read through its class costs a call (20,000 queues read it).
_FORBIDDEN = str(PreemptionKind.FORBIDDEN.value)


def _projects_per_pool(
    rules: EffectiveRules, pools: list[Pool], out: DesiredObjects
) -> tuple[dict[int, PoolProjects], dict[int, GpuFlavor]]:
    """Each pool's projects with their quotas there, and the flavors those quotas name; notes
    in ``out`` the projects whose grants name jobs (Kueue cannot apply them)."""
    pool_ids = {pool.pk for pool in pools}
    per_pool: dict[int, PoolProjects] = {pool.pk: [] for pool in pools}
    flavors: dict[int, GpuFlavor] = {}
    pool_keys = [pool.pk for pool in pools]
    for slug, project in sorted(rules.projects.items()):
        by_pool: dict[int, list[EffectiveQuota]] = defaultdict(list)
        for quota in project.quotas:
            row = quota.quota
            pool_id = row.pool_id
            if pool_id in pool_ids:
                by_pool[pool_id].append(quota)
                flavors[row.flavor_id] = row.flavor
        for pool_id in pool_keys:
            if by_pool.get(pool_id):
                per_pool[pool_id].append((slug, project, by_pool[pool_id]))
        if project.job_tiers or project.job_preemption_classes:
            jobs = sorted(set(project.job_tiers) | set(project.job_preemption_classes))
            out.notes.append(
                (
                    "Job",
                    slug,
                    _(
                        "Grants naming jobs (%(jobs)s) are not applied by Kueue: set the "
                        "job's kueue.x-k8s.io/priority-class label to the granted tier."
                    )
                    % {"jobs": ", ".join(jobs[:5])},
                )
            )
    return per_pool, flavors


def _tier_objects(rules: EffectiveRules, revision: int | None, out: DesiredObjects) -> None:
    """Each tier's PriorityClass and WorkloadPriorityClass; a note for its GPU caps."""
    for tier in rules.tiers:
        priority_class, workload_class = tier_objects(tier, revision)
        out.add(priority_class, f"tier {tier.slug}")
        out.add(workload_class, f"tier {tier.slug}")
        if tier.max_gpus_per_job or tier.max_gpus_total:
            out.notes.append(
                (
                    PRIORITY_CLASS,
                    k8s_name(tier.slug),
                    _(
                        "The GPU caps of tier %(tier)s are not enforced by Kueue (it has no "
                        "per-priority limits); enforce them with an admission policy."
                    )
                    % {"tier": tier.slug},
                )
            )


@dataclass
class _Queues:
    """The project queues of one cluster, gathered pool by pool: each (project, pool)'s
    ClusterQueue, its LocalQueues, and the namespaces they live in."""

    template: str
    revision: int | None
    default: PriorityTier | None
    tiers: dict[int, PriorityTier]
    namespaces: dict[str, str] = field(default_factory=dict)
    queues: list[tuple[Manifest, str, dict[str, str]]] = field(default_factory=list)
    local_queues: list[tuple[Manifest, str]] = field(default_factory=list)
    defaults: set[str] = field(default_factory=set)
    namespace_projects: dict[str, tuple[str, EffectiveProject]] = field(default_factory=dict)

    def add_pool(self, pool: Pool, projects: PoolProjects) -> dict[int, int]:
        """The queues of ``pool``'s projects; returns the GPUs they guarantee, per flavor."""
        pool_name = k8s_name(pool.slug)
        revision = self.revision
        guaranteed: dict[int, int] = defaultdict(int)
        for slug, project, quotas in projects:
            for quota in quotas:
                guaranteed[quota.quota.flavor_id] += quota.guarantee
            namespace = namespace_for(self.template, project=slug, pool=pool.slug)
            self.namespaces.setdefault(namespace, f"project {slug}")
            self.namespace_projects.setdefault(namespace, (slug, project))
            forbidden = any(q.preemption_class.kind == _FORBIDDEN for q in quotas)
            amounts, paths = _queue_amounts(slug, pool, quotas)
            guarantee = sum(q.guarantee for q in quotas)
            name = cluster_queue_name(slug, pool.slug)
            source = f"quotas of project {slug} in pool {pool.slug}"
            queue = _object(
                CLUSTER_QUEUE,
                _metadata(name, source, revision),
                spec={
                    "cohortName": pool_name,
                    # Never empty: a null selector admits no namespace at all.
                    "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
                    "resourceGroups": _gpu_group(amounts),
                    "preemption": preemption(
                        _top_tier(project, self.default, self.tiers),
                        forbidden=forbidden,
                        guaranteed=guarantee > 0,
                    ),
                    "fairSharing": {"weight": fair_share_weight(quotas)},
                    # Kueue's default, set so that drift shows a queue someone holds or drains.
                    "stopPolicy": "None",
                },
            )
            self.queues.append((queue, source, paths))
            names = [pool_name]
            if namespace not in self.defaults:
                # The namespace's first pool (by slug) also takes the Jobs without a queue
                # name: Kueue manages them (manageJobsWithoutQueueName) and its webhook gives
                # them the LocalQueue "default" (LocalQueueDefaulting).
                self.defaults.add(namespace)
                names.append(DEFAULT_LOCAL_QUEUE)
            for local_name in names:
                meta = _metadata(local_name, source, revision, namespace=namespace)
                self.local_queues.append(
                    (
                        _object(
                            LOCAL_QUEUE,
                            meta,
                            # Kueue's default, set so that a queue held or drained by hand is
                            # drift, restored by the next sync.
                            spec={"clusterQueue": name, "stopPolicy": "None"},
                        ),
                        source,
                    )
                )
        return guaranteed


def _queue_amounts(
    slug: str, pool: Pool, quotas: list[EffectiveQuota]
) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, str]]:
    """A ClusterQueue's GPUs per flavor, and the quota behind each (by field path)."""
    amounts = []
    paths = {}
    for flavor_slug, quota in sorted(
        ((q.quota.flavor.slug, q) for q in quotas), key=lambda pair: pair[0]
    ):
        limits: dict[str, Any] = {"nominalQuota": str(quota.guarantee)}
        if quota.preemption_class.kind == _FORBIDDEN:
            # Work that may never be preempted never runs on borrowed GPUs.
            limits["borrowingLimit"] = "0"
        elif quota.borrow_limit is not None:
            limits["borrowingLimit"] = str(quota.borrow_limit)
        if quota.lending_limit is not None:
            limits["lendingLimit"] = str(quota.lending_limit)
        flavor_name = k8s_name(flavor_slug)
        amounts.append((flavor_name, limits))
        paths[f"spec.resourceGroups[0].flavors[{flavor_name}]"] = (
            f"quota {slug}/{pool.slug}/{flavor_slug}"
            + (" (changed by an active grant)" if quota.grants else "")
        )
    return amounts, paths


def _cohort(
    pool: Pool,
    pools: list[Pool],
    flavors: dict[int, GpuFlavor],
    capacities: dict[tuple[int, int], int],
    guaranteed: dict[int, int],
    revision: int | None,
    out: DesiredObjects,
) -> None:
    """The pool's Cohort.

    What the pool holds beyond its projects' guarantees and its child pools (whose cohorts
    count in its subtree) is the cohort's own, shared by all of them."""
    pool_name = k8s_name(pool.slug)
    children = [child for child in pools if child.parent_id == pool.pk]
    shared = []
    for flavor_id, flavor in sorted(flavors.items(), key=lambda item: item[1].slug):
        capacity = capacities.get((pool.pk, flavor_id))
        if capacity is None:
            continue
        nested = sum(capacities.get((child.pk, flavor_id), 0) for child in children)
        rest = max(capacity - guaranteed.get(flavor_id, 0) - nested, 0)
        shared.append((k8s_name(flavor.slug), {"nominalQuota": str(rest)}))
    spec: dict[str, Any] = {"fairSharing": {"weight": "1"}}
    if pool.parent_id in {p.pk for p in pools} and pool.parent is not None:
        spec["parentName"] = k8s_name(pool.parent.slug)
    if shared:
        spec["resourceGroups"] = _gpu_group(shared)
    out.add(
        _object(COHORT, _metadata(pool_name, f"pool {pool.slug}", revision), spec=spec),
        f"pool {pool.slug}",
        **{
            f"spec.resourceGroups[0].flavors[{name}]": f"capacity of pool {pool.slug}"
            for name, _limits in shared
        },
    )
