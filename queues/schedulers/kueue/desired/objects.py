"""The manifests one rule compiles to: a tier's priority classes, a flavor, a queue's names,
preemption and fair share, and the ``DesiredObjects`` a sync collects them in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext as _

from governance.models import GpuFlavor, PriorityTier
from governance.selectors import EffectiveProject, EffectiveQuota

from ...backends import SchedulerError, State
from ..values import (
    API_VERSIONS,
    GPU_RESOURCE,
    KINDS,
    MANAGED_BY,
    MANAGED_BY_VALUE,
    NAMESPACED,
    PRIORITY_CLASS,
    RESOURCE_FLAVOR,
    REVISION_LABEL,
    SOURCE_ANNOTATION,
    WORKLOAD_PRIORITY_CLASS,
    Memo,
    flatten,
    flatten_all,
    k8s_name,
)

Manifest = dict[str, Any]
# A manifest's place in ``DesiredObjects.flat`` until ``state`` flattens it.
_PENDING: dict[str, str] = {}


@dataclass
class DesiredObjects:
    """The manifests of one sync, in creation order, and the rule behind each of them.

    ``sources[(kind, key)]`` maps a field path prefix (``""`` for the whole object) to the
    rule it comes from, so that a validation error names that rule.
    """

    manifests: list[Manifest] = field(default_factory=list)
    sources: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    notes: list[tuple[str, str, str]] = field(default_factory=list)
    # ``flatten_all`` of the manifests, by kind and key, built as they are added: the fields
    # the generator made with a manifest (``add_made``), or ``_PENDING`` for one ``state``
    # flattens (``pending``). ``added``: how many were added; when the list holds others
    # (put there by hand), ``state`` flattens them all.
    flat: State = field(
        default_factory=lambda: {kind: {} for kind in KINDS}, compare=False, repr=False
    )
    pending: list[tuple[str, str, Manifest]] = field(
        default_factory=list, compare=False, repr=False
    )
    added: int = field(default=0, compare=False, repr=False)

    def add(self, manifest: Manifest, source: str, **paths: str) -> None:
        self._add(manifest, source, None, paths)

    def add_made(
        self, manifest: Manifest, source: str, fields: dict[str, str], **paths: str
    ) -> None:
        """``add``, with ``fields``: ``flatten(manifest)``, made with the manifest
        (``desired.fields``), which is not changed after."""
        self._add(manifest, source, fields, paths)

    def _add(
        self,
        manifest: Manifest,
        source: str,
        fields: dict[str, str] | None,
        paths: dict[str, str],
    ) -> None:
        self.manifests.append(manifest)
        self.added += 1
        kind, meta = manifest["kind"], manifest["metadata"]
        # ``manifest_key``, written out (a sync adds 100,000 objects at 10,000 projects).
        key = (
            f"{meta.get('namespace', '')}/{meta.get('name', '')}"
            if kind in NAMESPACED
            else meta.get("name", "")
        )
        self.sources[(kind, key)] = {"": source, **paths} if paths else {"": source}
        flat = self.flat.get(kind)
        if flat is None:
            flat = self.flat[kind] = {}
        if fields is None:
            flat[key] = _PENDING
            self.pending.append((kind, key, manifest))
        else:
            flat[key] = fields

    def state(self) -> State:
        """``flatten_all(self.manifests)``: the fields made with the manifests as they are
        (the same dicts: not to be changed), the other manifests flattened now."""
        if self.added != len(self.manifests):  # manifests not added by ``add``
            return flatten_all(self.manifests)
        memo = Memo()
        # The last manifest of a kind and key wins, in the place of the first (as there):
        # a pending one only when no manifest with fields came after it.
        for kind, key, manifest in reversed(self.pending):
            if self.flat[kind][key] is _PENDING:
                self.flat[kind][key] = flatten(manifest, memo)
        return {kind: dict(objects) for kind, objects in self.flat.items()}

    def sort_by_kind(self) -> None:
        """The manifests in the creation order of their kinds (``API_VERSIONS``), each kind's
        in the order they were added (as a stable sort by kind, in one pass)."""
        by_kind: dict[str, list[Manifest]] = {kind: [] for kind in API_VERSIONS}
        for manifest in self.manifests:
            by_kind[manifest["kind"]].append(manifest)
        self.manifests = [manifest for kind in by_kind.values() for manifest in kind]

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
