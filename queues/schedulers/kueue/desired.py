"""Compiling the effective rules into Kubernetes and Kueue objects (plain manifests)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext as _

from governance.models import GpuFlavor, Pool, PreemptionKind, PriorityTier
from governance.selectors import EffectiveProject, EffectiveQuota, EffectiveRules

from ..backends import SchedulerError
from .values import (
    ADMISSION_POLICY,
    API_VERSIONS,
    CLUSTER_QUEUE,
    COHORT,
    GPU_RESOURCE,
    LOCAL_QUEUE,
    MANAGED_BY,
    MANAGED_BY_VALUE,
    MUTATING_BINDING,
    MUTATING_POLICY,
    NAMESPACE,
    NAMESPACE_NAME_LABEL,
    POLICY_BINDING,
    PRIORITY_CLASS,
    RESOURCE_FLAVOR,
    REVISION_LABEL,
    SOURCE_ANNOTATION,
    WORKLOAD_PRIORITY_CLASS,
    k8s_name,
    manifest_key,
)

Manifest = dict[str, Any]


@dataclass
class DesiredObjects:
    """The manifests of one sync, in creation order, and the rule behind each of them.

    ``sources[(kind, key)]`` maps a field path prefix (``""`` for the whole object) to the
    rule it comes from, so that a validation error names that rule.
    """

    manifests: list[Manifest] = field(default_factory=list)
    sources: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    notes: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, manifest: Manifest, source: str, **paths: str) -> None:
        self.manifests.append(manifest)
        key = (manifest["kind"], manifest_key(manifest))
        self.sources[key] = {"": source, **paths}

    def source(self, kind: str, key: str, path: str = "") -> str:
        found = self.sources.get((kind, key), {})
        best = ""
        for prefix in found:
            if prefix and path.startswith(prefix) and len(prefix) > len(best):
                best = prefix
        return found.get(best, "")


def namespace_for(template: str, *, project: str, pool: str) -> str:
    """The project's namespace from the cluster's rule (placeholders {project}, {pool})."""
    try:
        return template.format(project=k8s_name(project), pool=k8s_name(pool))
    except (KeyError, IndexError, ValueError) as error:
        raise SchedulerError(
            _(
                "The namespace rule “%(template)s” is not valid (%(error)s): use the "
                "placeholders {project} and {pool} only."
            )
            % {"template": template, "error": error}
        ) from error


DEFAULT_LOCAL_QUEUE = "default"


def cluster_queue_name(project: str, pool: str) -> str:
    """``<project>--<pool>``: no dots (Kueue copies the queue's name into label values of the
    workloads' pods only when it is a valid label value); ``--`` never occurs in one slug."""
    return f"{k8s_name(project)}--{k8s_name(pool)}"


def fair_share_weight(quotas: list[EffectiveQuota]) -> str:
    """The ClusterQueue's one weight: the quotas' weights averaged by their guarantees (all
    alike when nothing is guaranteed), not their sum, which grew with the number of flavors."""
    total = sum(q.guarantee for q in quotas)
    if total:
        value = sum(q.quota.fair_share_weight * q.guarantee for q in quotas) / total
    else:
        value = sum(q.quota.fair_share_weight for q in quotas) / len(quotas)
    return f"{value:.3f}".rstrip("0").rstrip(".") or "0"


def _metadata(name: str, source: str, revision: int | None, namespace: str = "") -> dict[str, Any]:
    # "0": no rules revision recorded yet (a database that has only its first rules).
    labels = {MANAGED_BY: MANAGED_BY_VALUE, REVISION_LABEL: str(revision or 0)}
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = labels
    meta["annotations"] = {SOURCE_ANNOTATION: source}
    return meta


def _object(kind: str, meta: dict[str, Any], **body: Any) -> Manifest:
    return {"apiVersion": API_VERSIONS[kind], "kind": kind, "metadata": meta, **body}


def tier_objects(tier: PriorityTier, revision: int | None) -> tuple[Manifest, Manifest]:
    name = k8s_name(tier.slug)
    source = f"tier {tier.slug}"
    text = f"Arbiter tier {tier.name}" + (f": {tier.description}" if tier.description else "")
    priority_class = _object(
        PRIORITY_CLASS,
        _metadata(name, source, revision),
        value=tier.scheduler_value,
        globalDefault=bool(tier.is_default),
        description=text,
        # Only Kueue preempts for quota: kube-scheduler never evicts for a pod of any tier. The
        # tier order still reaches it through ``value`` (its queue order), and Kueue's
        # preemption follows the WorkloadPriorityClass of the same value.
        preemptionPolicy="Never",
    )
    workload_class = _object(
        WORKLOAD_PRIORITY_CLASS,
        _metadata(name, source, revision),
        value=tier.scheduler_value,
        description=text[:2048],
    )
    return priority_class, workload_class


def flavor_object(flavor: GpuFlavor, revision: int | None) -> Manifest:
    spec: dict[str, Any] = {}
    if flavor.node_labels:
        spec["nodeLabels"] = {str(k): str(v) for k, v in sorted(flavor.node_labels.items())}
    taints = [
        {key: taint[key] for key in ("key", "value", "effect") if taint.get(key)}
        for taint in flavor.node_taints or []
    ]
    if taints:
        spec["nodeTaints"] = taints
        # Kueue adds the flavor's tolerations to the pods it admits on the flavor.
        spec["tolerations"] = [
            {
                "key": taint["key"],
                "operator": "Equal" if taint.get("value") else "Exists",
                **({"value": taint["value"]} if taint.get("value") else {}),
                "effect": taint["effect"],
            }
            for taint in taints
        ]
    return _object(
        RESOURCE_FLAVOR,
        _metadata(k8s_name(flavor.slug), f"flavor {flavor.slug}", revision),
        spec=spec,
    )


def _gpu_group(amounts: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    if not amounts:
        return []
    return [
        {
            "coveredResources": [GPU_RESOURCE],
            "flavors": [
                {"name": flavor, "resources": [{"name": GPU_RESOURCE, **limits}]}
                for flavor, limits in amounts
            ],
        }
    ]


def _top_tier(
    project: EffectiveProject, default: PriorityTier | None, tiers: dict[int, PriorityTier]
) -> PriorityTier | None:
    """The project's top tier, as the rules' own tier object (whose victims are prefetched)."""
    top = project.tier or default
    return tiers.get(top.pk, top) if top is not None else None


def preemption(top: PriorityTier | None, *, forbidden: bool, guaranteed: bool) -> dict[str, Any]:
    """Kueue preemption of one project's ClusterQueue.

    * ``withinClusterQueue``: the project's work of a higher tier preempts its own
      lower-tier work when its top tier may preempt; never when its class is forbidden.
    * ``reclaimWithinCohort``: a guarantee is given back when asked (``Any`` borrower is
      preempted); without a guarantee there is nothing to reclaim.
    * ``borrowWithinCohort``: ``Never``. Kueue runs with fair sharing on (the documented
      configuration, deploy/k8s/kueue-config.yaml), and then ignores this field: preemption
      while borrowing follows the fair-sharing strategies, and a priority threshold could
      not name the victim tiers anyway (the plan lists may-preempt as not enforced).
    """
    may_preempt = bool(top is not None and top.may_preempt)
    result: dict[str, Any] = {
        "withinClusterQueue": "LowerPriority" if may_preempt and not forbidden else "Never",
        "reclaimWithinCohort": "Any" if guaranteed else "Never",
        "borrowWithinCohort": {"policy": "Never"},
    }
    return result


TIER_LABEL = "kueue.x-k8s.io/priority-class"


# The workload kinds the tier policies cover: Jobs, bare Pods (also each Pod a Deployment or
# StatefulSet makes, which Kueue's pod integration gates), Deployments and StatefulSets.
WORKLOAD_RESOURCES = (
    ("batch", "jobs"),
    ("", "pods"),
    ("apps", "deployments"),
    ("apps", "statefulsets"),
)


def _job_rules(operations: list[str]) -> dict[str, Any]:
    # With the server's defaults spelled out: the field is compared as one value.
    return {
        "matchPolicy": "Equivalent",
        "namespaceSelector": {},
        "objectSelector": {},
        "resourceRules": [
            {
                "apiGroups": [group],
                "apiVersions": ["v1"],
                "operations": operations,
                "resources": [resource],
                "scope": "*",
            }
            for group, resource in WORKLOAD_RESOURCES
        ],
    }


def _in_namespace(namespace: str) -> dict[str, Any]:
    return {
        "matchPolicy": "Equivalent",
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
        "objectSelector": {},
    }


def tier_policy(
    namespace: str,
    *,
    allowed: list[str],
    own: str,
    default: str,
    source: str,
    revision: int | None,
    mutating: bool = True,
) -> list[Manifest]:
    """The tier policies of one project namespace (``arbiter-tiers-<namespace>``).

    * A ValidatingAdmissionPolicy and its binding: its Jobs may name only the tiers the
      project's effective rules allow (grants included: the sync after a grant's expiry
      narrows the list again), as Kueue label and as pod PriorityClass.
    * With ``mutating`` (the server serves MutatingAdmissionPolicy): a
      MutatingAdmissionPolicy and its binding that give a Job created without a tier (no
      label ``kueue.x-k8s.io/priority-class``, no ``priorityClassName``) the label of the
      project's effective tier ``own`` (grants included, so the sync after a grant's expiry
      lowers it again), never the cluster's default.
    * Without it (an older server), the fallback: a Job naming no tier gets the cluster's
      default PriorityClass from Kueue, so the validating policy admits it only when that
      is the project's own tier, and refuses it otherwise with the label to set.
    """
    name = f"arbiter-tiers-{namespace}"
    manifests = [
        _object(
            ADMISSION_POLICY,
            _metadata(name, source, revision),
            spec={
                "failurePolicy": "Fail",
                "matchConstraints": _job_rules(["CREATE", "UPDATE"]),
                "validations": _tier_validations(
                    allowed, own=own, default=default, mutating=mutating
                ),
            },
        ),
        _object(
            POLICY_BINDING,
            _metadata(name, source, revision),
            spec={
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": _in_namespace(namespace),
            },
        ),
    ]
    if mutating and own:
        manifests += _own_tier_policy(
            name, namespace, own=own, default=default, source=source, revision=revision
        )
    return manifests


_LABELS = "(has(object.metadata.labels) ? object.metadata.labels : {})"
_HAS_TIER = f"'{TIER_LABEL}' in {_LABELS}"
# A Pod's own spec, or the pod template's of a Job, Deployment or StatefulSet.
_POD = "(object.kind == 'Pod' ? object.spec : object.spec.template.spec)"


def _tier_validations(
    allowed: list[str], *, own: str, default: str, mutating: bool
) -> list[dict[str, str]]:
    """The validating policy's checks: only ``allowed`` tiers, as label and as pod
    PriorityClass; without ``mutating``, a Job naming no tier only where the cluster's default
    is the project's own tier."""
    names = "[" + ", ".join(f"'{tier}'" for tier in allowed) + "]"
    validations = [
        {
            "expression": f"!({_HAS_TIER}) || {_LABELS}['{TIER_LABEL}'] in {names}",
            "message": f"Arbiter: this project may use the tiers {', '.join(allowed)} only "
            f"(label {TIER_LABEL}).",
            "reason": "Forbidden",
        },
        {
            "expression": f"!has({_POD}.priorityClassName) || "
            f"{_POD}.priorityClassName in {names}" + _defaulted_pod(default, f" && {_HAS_TIER}"),
            "message": f"Arbiter: this project may use the tiers {', '.join(allowed)} only "
            "(priorityClassName).",
            "reason": "Forbidden",
        },
    ]
    if not mutating and own != default:
        validations.append(
            {
                "expression": f"{_HAS_TIER} || has({_POD}.priorityClassName)",
                "message": f"Arbiter: this project's tier is {own}, not the cluster default "
                f"{default}: set the label {TIER_LABEL}={own}.",
                "reason": "Invalid",
            }
        )
    return validations


def _defaulted_pod(default: str, also: str = "") -> str:
    """A Pod whose priorityClassName is the cluster's default: the API server's Priority
    admission plugin gives it to every Pod naming none, before any admission policy runs, so
    such a Pod counts as naming no tier (Kueue reads the tier label first)."""
    if not default:
        return ""
    return f" || (object.kind == 'Pod' && {_POD}.priorityClassName == '{default}'{also})"


def _own_tier_policy(
    name: str, namespace: str, *, own: str, default: str, source: str, revision: int | None
) -> list[Manifest]:
    """The MutatingAdmissionPolicy and binding that label a Job, Pod, Deployment or
    StatefulSet naming no tier with ``own``."""
    return [
        _object(
            MUTATING_POLICY,
            _metadata(name, source, revision),
            spec={
                "failurePolicy": "Fail",
                "reinvocationPolicy": "Never",
                "matchConstraints": _job_rules(["CREATE"]),
                "matchConditions": [
                    {
                        "name": "names-no-tier",
                        "expression": f"!({_HAS_TIER}) && (!has({_POD}.priorityClassName)"
                        + _defaulted_pod(default)
                        + ")",
                    }
                ],
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {
                            "expression": "Object{metadata: Object.metadata{labels: "
                            f"{{'{TIER_LABEL}': '{own}'}}}}}}"
                        },
                    }
                ],
            },
        ),
        _object(
            MUTATING_BINDING,
            _metadata(name, source, revision),
            spec={"policyName": name, "matchResources": _in_namespace(namespace)},
        ),
    ]


GPU_POLICY = "arbiter-gpu-through-kueue"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
# Kueue's mark on the Pods of a StatefulSet (or another parent) it admits as a whole.
SUSPENDED_BY_PARENT = "kueue.x-k8s.io/pod-suspending-parent"
# The users that create the Pods of a batch/v1 Job (Kueue manages the Job itself, suspended
# until admitted): the job controller's service account (kube-controller-manager with
# --use-service-account-credentials) or the controller manager's own identity.
JOB_CONTROLLERS = (
    "system:serviceaccount:kube-system:job-controller",
    "system:kube-controller-manager",
)


def _asks_gpus(containers: str) -> str:
    return (
        f"(has({containers}) && {containers}.exists(c, has(c.resources) && "
        f"((has(c.resources.limits) && '{GPU_RESOURCE}' in c.resources.limits) || "
        f"(has(c.resources.requests) && '{GPU_RESOURCE}' in c.resources.requests))))"
    )


def gpu_policy(revision: int | None) -> list[Manifest]:
    """Every GPU Pod in a governed namespace goes through Kueue or is refused: a
    ValidatingAdmissionPolicy (and its binding to the namespaces labelled
    ``app.kubernetes.io/managed-by=arbiter``) refusing a Pod asking for GPUs that Kueue's pod
    integration did not take (the scheduling gate ``kueue.x-k8s.io/admission`` with the label
    ``kueue.x-k8s.io/managed=true``, or for a StatefulSet's Pods the annotation
    ``kueue.x-k8s.io/pod-suspending-parent``: set by Kueue's webhook before any validating
    admission), unless the job
    controller creates it for a batch/v1 Job (which Kueue admits as a whole)."""
    source = "rule: every GPU workload in a governed namespace goes through Kueue"
    gpus = " || ".join(
        _asks_gpus(f"object.spec.{field}") for field in ("containers", "initContainers")
    )
    labels = "(has(object.metadata.labels) ? object.metadata.labels : {})"
    annotations = "(has(object.metadata.annotations) ? object.metadata.annotations : {})"
    managed = (
        f"((('{MANAGED_LABEL}' in {labels} && {labels}['{MANAGED_LABEL}'] == 'true') || "
        f"'{SUSPENDED_BY_PARENT}' in {annotations}) && "
        "has(object.spec.schedulingGates) && "
        f"object.spec.schedulingGates.exists(g, g.name == '{ADMISSION_GATE}'))"
    )
    controllers = "[" + ", ".join(f"'{user}'" for user in JOB_CONTROLLERS) + "]"
    job_pod = (
        "(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, "
        "o.apiVersion == 'batch/v1' && o.kind == 'Job' && has(o.controller) && o.controller) "
        f"&& request.userInfo.username in {controllers})"
    )
    return [
        _object(
            ADMISSION_POLICY,
            _metadata(GPU_POLICY, source, revision),
            spec={
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "matchPolicy": "Equivalent",
                    "namespaceSelector": {},
                    "objectSelector": {},
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                            "scope": "*",
                        }
                    ],
                },
                "validations": [
                    {
                        "expression": f"!({gpus}) || {managed} || {job_pod}",
                        "message": "Arbiter rule “every GPU workload in a governed namespace "
                        "goes through Kueue”: this Pod asks for nvidia.com/gpu but Kueue does "
                        "not manage it (no kueue.x-k8s.io/admission gate of Kueue's); "
                        "submit it as a Job, or as a Pod, Deployment or StatefulSet Kueue "
                        "manages.",
                        "reason": "Forbidden",
                    }
                ],
            },
        ),
        _object(
            POLICY_BINDING,
            _metadata(GPU_POLICY, source, revision),
            spec={
                "policyName": GPU_POLICY,
                "validationActions": ["Deny"],
                "matchResources": {
                    "matchPolicy": "Equivalent",
                    "namespaceSelector": {"matchLabels": {MANAGED_BY: MANAGED_BY_VALUE}},
                    "objectSelector": {},
                },
            },
        ),
    ]


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
    for namespace, (slug, project) in sorted(queues.namespace_projects.items()):
        own = _top_tier(project, default, queues.tiers)
        allowed_slugs = {k8s_name(t.slug) for t in project.allowed_tiers}
        if own is not None:
            allowed_slugs.add(k8s_name(own.slug))
        allowed = sorted(allowed_slugs)
        source = f"tiers of project {slug}"
        for manifest in tier_policy(
            namespace,
            allowed=allowed,
            own=k8s_name(own.slug) if own else "",
            default=k8s_name(default.slug) if default else "",
            source=source,
            revision=revision,
            mutating=mutating,
        ):
            out.add(manifest, source)
    if queues.namespaces:
        for manifest in gpu_policy(revision):
            out.add(manifest, manifest["metadata"]["annotations"][SOURCE_ANNOTATION])
    for namespace, source in sorted(queues.namespaces.items()):
        meta = _metadata(namespace, source, revision)
        meta["labels"][NAMESPACE_NAME_LABEL] = namespace
        out.add(_object(NAMESPACE, meta), source)
    for queue, source, paths in queues.queues:
        out.add(queue, source, **paths)
    for local_queue, source in queues.local_queues:
        out.add(local_queue, source)
    order = {kind: index for index, kind in enumerate(API_VERSIONS)}
    out.manifests.sort(key=lambda m: order[m["kind"]])
    return out


PoolProjects = list[tuple[str, EffectiveProject, list[EffectiveQuota]]]


def _projects_per_pool(
    rules: EffectiveRules, pools: list[Pool], out: DesiredObjects
) -> tuple[dict[int, PoolProjects], dict[int, GpuFlavor]]:
    """Each pool's projects with their quotas there, and the flavors those quotas name; notes
    in ``out`` the projects whose grants name jobs (Kueue cannot apply them)."""
    pool_ids = {pool.pk for pool in pools}
    per_pool: dict[int, PoolProjects] = {pool.pk: [] for pool in pools}
    flavors: dict[int, GpuFlavor] = {}
    for slug, project in sorted(rules.projects.items()):
        by_pool: dict[int, list[EffectiveQuota]] = defaultdict(list)
        for quota in project.quotas:
            if quota.quota.pool_id in pool_ids:
                by_pool[quota.quota.pool_id].append(quota)
                flavors[quota.quota.flavor_id] = quota.quota.flavor
        for pool in pools:
            if by_pool.get(pool.pk):
                per_pool[pool.pk].append((slug, project, by_pool[pool.pk]))
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
            forbidden = any(q.preemption_class.kind == PreemptionKind.FORBIDDEN for q in quotas)
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
    for quota in sorted(quotas, key=lambda q: q.quota.flavor.slug):
        limits: dict[str, Any] = {"nominalQuota": str(quota.guarantee)}
        if quota.preemption_class.kind == PreemptionKind.FORBIDDEN:
            # Work that may never be preempted never runs on borrowed GPUs.
            limits["borrowingLimit"] = "0"
        elif quota.borrow_limit is not None:
            limits["borrowingLimit"] = str(quota.borrow_limit)
        if quota.lending_limit is not None:
            limits["lendingLimit"] = str(quota.lending_limit)
        flavor_name = k8s_name(quota.quota.flavor.slug)
        amounts.append((flavor_name, limits))
        paths[f"spec.resourceGroups[0].flavors[{flavor_name}]"] = (
            f"quota {slug}/{pool.slug}/{quota.quota.flavor.slug}"
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
