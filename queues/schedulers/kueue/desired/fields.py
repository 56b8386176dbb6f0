"""The flattened fields of the objects of the bulk kinds, made as they are generated.

At 10,000 projects a sync flattened 100,000 objects (``values.flatten``) to plan them,
walking back through manifests whose shape the generator knew: a quarter of the export and
plan. The generator hands these fields to ``DesiredObjects.add_made`` instead
(ClusterQueues, LocalQueues, namespaces and the tier policies: all but a handful of the
objects), and ``DesiredObjects.state`` flattens only the others. Each function gives exactly
``values.flatten`` of the manifest the generator made (the same fields, values and order):
tests/queues/test_kueue_plan_fast.py compares them on every object of the golden
organisation, on every variant of the tier policies and on the shapes of a ClusterQueue.

The values many objects share (a policy's rules, validations and patch, a resource's
limits) are encoded once per set of inputs (``lru_cache``), from the same functions that
build the manifests; a namespace's selector is encoded into a template encoded once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ..values import (
    MANAGED_BY_FIELD,
    MANAGED_BY_VALUE,
    NAMESPACE_NAME_LABEL,
    _canonical,
    normalise_quantity,
)
from .policies import (
    _in_namespace,
    _job_rules,
    _label_mutation,
    _names_no_tier,
    _tier_validations,
)

Fields = dict[str, str]


def namespace_fields() -> Fields:
    return {MANAGED_BY_FIELD: MANAGED_BY_VALUE}


def local_queue_fields(spec: dict[str, Any]) -> Fields:
    """A LocalQueue's ``{"clusterQueue": ..., "stopPolicy": ...}`` (text leaves)."""
    return {
        MANAGED_BY_FIELD: MANAGED_BY_VALUE,
        "spec.clusterQueue": spec["clusterQueue"],
        "spec.stopPolicy": spec["stopPolicy"],
    }


def cluster_queue_fields(spec: dict[str, Any]) -> Fields:
    """A ClusterQueue's spec as ``_Queues.add_pool`` makes it: its keys in sorted order,
    each resource's optional limits present (``""`` when absent), quantities normalised."""
    preemption = spec["preemption"]
    out = {
        MANAGED_BY_FIELD: MANAGED_BY_VALUE,
        "spec.cohortName": spec["cohortName"],
        "spec.fairSharing.weight": normalise_quantity(spec["fairSharing"]["weight"]),
        "spec.namespaceSelector": _selector_text(spec["namespaceSelector"]),
        "spec.preemption.borrowWithinCohort.policy": preemption["borrowWithinCohort"]["policy"],
        "spec.preemption.reclaimWithinCohort": preemption["reclaimWithinCohort"],
        "spec.preemption.withinClusterQueue": preemption["withinClusterQueue"],
    }
    groups = spec["resourceGroups"]
    if not groups:
        out["spec.resourceGroups"] = ""
    for index, group in enumerate(groups):
        path = f"spec.resourceGroups[{index}]"
        out[f"{path}.coveredResources"] = _canonical(group["coveredResources"])
        flavors = group["flavors"]
        out[f"{path}.flavors"] = ",".join([flavor["name"] for flavor in flavors])
        for flavor in flavors:
            resources = flavor["resources"]
            out[_resources_path(index, flavor["name"])] = ",".join(
                [resource["name"] for resource in resources]
            )
            for resource in resources:
                get = resource.get
                out.update(
                    _limits(
                        index,
                        flavor["name"],
                        resource["name"],
                        get("borrowingLimit"),
                        get("lendingLimit"),
                        get("nominalQuota"),
                    )
                )
    out["spec.stopPolicy"] = spec["stopPolicy"]
    return out


# A resource's limits, sorted: both optional ones are always present.
_LIMITS = ("borrowingLimit", "lendingLimit", "nominalQuota")


@lru_cache(maxsize=1024)
def _resources_path(index: int, flavor: str) -> str:
    return f"spec.resourceGroups[{index}].flavors[{flavor}].resources"


@lru_cache(maxsize=4096, typed=True)
def _limits(
    index: int, flavor: str, resource: str, borrowing: Any, lending: Any, nominal: Any
) -> dict[str, str]:
    """One resource's limits (queues share a few combinations), sorted, each present."""
    prefix = f"{_resources_path(index, flavor)}[{resource}]"
    return {
        f"{prefix}.{limit}": "" if value is None else normalise_quantity(value)
        for limit, value in zip(_LIMITS, (borrowing, lending, nominal), strict=True)
    }


def _template(build: Callable[[str], Any]) -> Callable[[str], str]:
    """``lambda text: _canonical(build(text))`` for a ``build`` that puts ``text`` in one
    value (not a key) of the same structure: encoded once, with a placeholder in its place."""
    placeholder = json.encoder.encode_basestring_ascii("\0")
    head, found, tail = _canonical(build("\0")).partition(placeholder)
    if not found or placeholder in tail:
        return lambda text: _canonical(build(text))
    encode = json.encoder.encode_basestring_ascii
    return lambda text: head + encode(text) + tail


_SELECTOR = _template(lambda namespace: {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}})
_IN_NAMESPACE = _template(_in_namespace)


def _selector_text(selector: dict[str, Any]) -> str:
    """``_canonical(selector)`` of a selector of one namespace, by the template."""
    labels = selector.get("matchLabels")
    if (
        len(selector) == 1
        and type(labels) is dict
        and len(labels) == 1
        and type(name := labels.get(NAMESPACE_NAME_LABEL)) is str
    ):
        return _SELECTOR(name)
    return _canonical(selector)


@lru_cache(maxsize=16)
def _job_rules_text(operations: tuple[str, ...]) -> str:
    return _canonical(_job_rules(list(operations)))


@lru_cache(maxsize=1024)
def _validations_text(allowed: tuple[str, ...], own: str, default: str, mutating: bool) -> str:
    return _canonical(_tier_validations(list(allowed), own=own, default=default, mutating=mutating))


@lru_cache(maxsize=16)
def _conditions_text(default: str) -> str:
    return _canonical(_names_no_tier(default))


@lru_cache(maxsize=1024)
def _mutations_text(own: str) -> str:
    return _canonical(_label_mutation(own))


_DENY = _canonical(["Deny"])


def tier_policy_fields(
    namespace: str, *, allowed: list[str], own: str, default: str, mutating: bool = True
) -> list[Fields]:
    """The fields of ``policies.tier_policy``'s manifests (same arguments), in its order."""
    name = f"arbiter-tiers-{namespace}"
    selector = _IN_NAMESPACE(namespace)
    fields = [
        {
            MANAGED_BY_FIELD: MANAGED_BY_VALUE,
            "spec.failurePolicy": "Fail",
            "spec.matchConstraints": _job_rules_text(("CREATE", "UPDATE")),
            "spec.validations": _validations_text(tuple(allowed), own, default, mutating),
        },
        {
            MANAGED_BY_FIELD: MANAGED_BY_VALUE,
            "spec.matchResources": selector,
            "spec.policyName": name,
            "spec.validationActions": _DENY,
        },
    ]
    if mutating and own:
        fields += [
            {
                MANAGED_BY_FIELD: MANAGED_BY_VALUE,
                "spec.failurePolicy": "Fail",
                "spec.matchConditions": _conditions_text(default),
                "spec.matchConstraints": _job_rules_text(("CREATE",)),
                "spec.mutations": _mutations_text(own),
                "spec.reinvocationPolicy": "Never",
            },
            {
                MANAGED_BY_FIELD: MANAGED_BY_VALUE,
                "spec.matchResources": selector,
                "spec.policyName": name,
            },
        ]
    return fields
