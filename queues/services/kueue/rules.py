"""The CEL rules of Kueue's CRDs and Kueue's webhook checks, written out in Python.

API servers before Kubernetes 1.25 ignore ``x-kubernetes-validations``, and Kueue's
webhooks run only where Kueue runs: these checks give the same messages offline. Transition
rules (``oldSelf``: immutable fields) need the stored object and are left to the server.
PriorityClass rules are the API server's own (value ≤ 1,000,000,000, no ``system-`` names).
Each check yields ``(field path, message)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.utils.translation import gettext as _

from queues.schedulers.kueue.values import (
    CLUSTER_QUEUE,
    COHORT,
    MAX_PRIORITY,
    PRIORITY_CLASS,
    RESOURCE_FLAVOR,
    parse_quantity,
)

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _quantity(value: Any) -> Any:
    if value is None:
        return None
    if type(value) is not str:
        return parse_quantity(value)
    # A sync's queues share a handful of quantities ("0", "4", ...): each parsed once.
    known = _PARSED.get(value, _UNPARSED)
    if known is _UNPARSED:
        known = parse_quantity(value)
        if len(_PARSED) < 10_000:
            _PARSED[value] = known
    return known


# Quantities parsed (bounded), and the mark of one not parsed yet.
_PARSED: dict[str, Any] = {}
_UNPARSED = object()


def _resource_group_rules(spec: dict[str, Any], owner: str) -> Iterator[tuple[str, str]]:
    """CEL and webhook rules shared by ClusterQueue and Cohort resource groups."""
    groups = spec.get("resourceGroups") or []
    has_parent = bool(spec.get("cohortName" if owner == CLUSTER_QUEUE else "parentName"))
    nil_message = (
        "must be nil when cohort is empty"
        if owner == CLUSTER_QUEUE
        else "must be nil when parent is empty"
    )
    seen_flavors: set[str] = set()
    seen_resources: set[str] = set()
    total_flavors = 0
    total_resources = 0
    for g, group in enumerate(groups):
        if not isinstance(group, dict):
            continue
        covered = list(group.get("coveredResources") or [])
        flavors = group.get("flavors") or []
        total_flavors += len(flavors)
        total_resources += len(covered)
        base = f"spec.resourceGroups[{g}]"
        for resource in covered:
            if resource in seen_resources:
                yield (
                    f"{base}.coveredResources",
                    f"resource {resource} is covered by more than one resource group",
                )
            seen_resources.add(resource)
        if len(flavors) * len(covered) > 512:
            yield base, "number of flavor-resource combinations in a resourceGroup must be ≤ 512"
        for flavor in flavors:
            if not isinstance(flavor, dict):
                continue
            fname = flavor.get("name", "")
            if fname in seen_flavors:
                yield (
                    f"{base}.flavors[{fname}]",
                    f"flavor {fname} is used by more than one resource group",
                )
            seen_flavors.add(fname)
            resources = flavor.get("resources") or []
            if len(resources) != len(covered):
                yield base, "flavors must have the same number of resources as the coveredResources"
            for r, resource in enumerate(resources):
                if isinstance(resource, dict):
                    yield from _resource_rules(
                        resource, r, covered, has_parent, nil_message, f"{base}.flavors[{fname}]"
                    )
    if total_flavors > 256:
        yield (
            "spec.resourceGroups",
            "total number of flavors across all resourceGroups must be ≤ 256",
        )
    if total_resources > 256:
        yield (
            "spec.resourceGroups",
            "total number of covered resources across all resourceGroups must be ≤ 256",
        )


def _resource_rules(
    resource: dict[str, Any],
    r: int,
    covered: list[Any],
    has_parent: bool,
    nil_message: str,
    fpath: str,
) -> Iterator[tuple[str, str]]:
    """The rules of one flavor's resource (``r``-th): its name, its limits. Each quantity is
    parsed once, and the field path is written only for a violation."""
    rname = resource.get("name", "")
    if r < len(covered) and rname != covered[r]:
        yield (
            f"{fpath}.resources[{rname}].name",
            f"must match the name in coveredResources ({covered[r]})",
        )
    nominal = _quantity(resource.get("nominalQuota"))
    borrowing = resource.get("borrowingLimit")
    lending_value = resource.get("lendingLimit")
    lending = _quantity(lending_value)
    for limit, amount in (
        ("nominalQuota", nominal),
        ("borrowingLimit", _quantity(borrowing)),
        ("lendingLimit", lending),
    ):
        if amount is not None and amount < 0:
            yield f"{fpath}.resources[{rname}].{limit}", "must be greater than or equal to 0"
    if not has_parent:
        for limit, value in (("borrowingLimit", borrowing), ("lendingLimit", lending_value)):
            if value is not None:
                yield f"{fpath}.resources[{rname}].{limit}", f"{limit} {nil_message}"
    if lending is not None and nominal is not None and lending > nominal:
        yield (
            f"{fpath}.resources[{rname}].lendingLimit",
            "must be less than or equal to the nominalQuota",
        )


def _cluster_queue_rules(spec: dict[str, Any]) -> Iterator[tuple[str, str]]:
    yield from _resource_group_rules(spec, CLUSTER_QUEUE)
    if spec.get("namespaceSelector") is None:
        yield "spec.namespaceSelector", _("must be set: a null selector admits no namespace")
    fungibility = spec.get("flavorFungibility") or {}
    if "preference" in fungibility and not (
        fungibility.get("whenCanBorrow") == "TryNextFlavor"
        and fungibility.get("whenCanPreempt") == "TryNextFlavor"
    ):
        yield (
            "spec.flavorFungibility.preference",
            "preference can only be set when both whenCanBorrow and whenCanPreempt "
            "are TryNextFlavor",
        )
    preemption = spec.get("preemption") or {}
    borrow = preemption.get("borrowWithinCohort")
    if (
        preemption.get("reclaimWithinCohort", "Never") == "Never"
        and isinstance(borrow, dict)
        and borrow.get("policy", "Never") != "Never"
    ):
        yield "spec.preemption", "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"


def _flavor_rules(spec: dict[str, Any]) -> Iterator[tuple[str, str]]:
    if spec.get("topologyName") and len(spec.get("nodeLabels") or {}) < 1:
        yield "spec", "at least one nodeLabel is required when topology is set"
    for t, taint in enumerate(spec.get("nodeTaints") or []):
        if isinstance(taint, dict) and taint.get("effect") not in TAINT_EFFECTS:
            yield (
                f"spec.nodeTaints[{t}]",
                "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
            )
    for t, toleration in enumerate(spec.get("tolerations") or []):
        if not isinstance(toleration, dict):
            continue
        path = f"spec.tolerations[{t}]"
        operator = toleration.get("operator")
        if "key" not in toleration and operator != "Exists":
            yield (
                path,
                "operator must be Exists when 'key' is empty, which means "
                "'match all values and all keys'",
            )
        if "tolerationSeconds" in toleration and toleration.get("effect") != "NoExecute":
            yield path, "effect must be 'NoExecute' when 'tolerationSeconds' is set"
        if operator is not None and operator not in ("Equal", "Exists"):
            yield path, "supported toleration values: 'Equal'(default), 'Exists'"
        if operator == "Exists" and "value" in toleration:
            yield path, "a value must be empty when 'operator' is 'Exists'"
        if "effect" in toleration and toleration["effect"] not in TAINT_EFFECTS:
            yield (
                path,
                "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
            )


def _priority_class_rules(manifest: dict[str, Any]) -> Iterator[tuple[str, str]]:
    name = str(manifest.get("metadata", {}).get("name", ""))
    value = manifest.get("value")
    if isinstance(value, int) and value > MAX_PRIORITY:
        yield "value", "maximum allowed value of a user defined priority is 1000000000"
    if name.startswith("system-"):
        yield "metadata.name", "priority class names with 'system-' prefix are reserved"


RULES = {
    CLUSTER_QUEUE: lambda m: _cluster_queue_rules(m.get("spec") or {}),
    COHORT: lambda m: _resource_group_rules(m.get("spec") or {}, COHORT),
    RESOURCE_FLAVOR: lambda m: _flavor_rules(m.get("spec") or {}),
    PRIORITY_CLASS: _priority_class_rules,
}
