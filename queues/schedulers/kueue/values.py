"""Kueue kinds, Arbiter's labels, Kubernetes names and quantities, and flattening objects.

A Kubernetes object is compared field by field as a flat ``{path: value}`` map (the
``State`` of ``backends``): ``spec.resourceGroups[0].flavors[a100].resources[nvidia.com/gpu]
.nominalQuota`` → ``"12"``. Lists keyed by ``name`` are indexed by name, and their member
names are a field of their own (removing a flavor is a change of ``...flavors``); small maps
(node labels, selectors) and scalar lists are one canonical JSON value; the optional limits
Arbiter may leave out are always present (``""`` when absent), so that dropping one is seen.
Quantities are normalised (``12000m`` → ``12``), so a sync never flaps.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
KUEUE_API = f"{GROUP}/{VERSION}"
SCHEDULING_API = "scheduling.k8s.io/v1"

NAMESPACE = "Namespace"
PRIORITY_CLASS = "PriorityClass"
WORKLOAD_PRIORITY_CLASS = "WorkloadPriorityClass"
RESOURCE_FLAVOR = "ResourceFlavor"
COHORT = "Cohort"
CLUSTER_QUEUE = "ClusterQueue"
LOCAL_QUEUE = "LocalQueue"
ADMISSION_POLICY = "ValidatingAdmissionPolicy"
POLICY_BINDING = "ValidatingAdmissionPolicyBinding"
ADMISSION_API = "admissionregistration.k8s.io/v1"
# Kubernetes 1.34 and 1.35 serve MutatingAdmissionPolicy as v1beta1, off by default (feature
# gate MutatingAdmissionPolicy and runtime-config admissionregistration.k8s.io/v1beta1).
MUTATING_POLICY = "MutatingAdmissionPolicy"
MUTATING_BINDING = "MutatingAdmissionPolicyBinding"
MUTATING_API = "admissionregistration.k8s.io/v1beta1"
# In the order they are created (a queue needs its cohort, flavors and namespace first);
# deletes run in the reverse order.
KINDS = (
    NAMESPACE,
    PRIORITY_CLASS,
    WORKLOAD_PRIORITY_CLASS,
    RESOURCE_FLAVOR,
    COHORT,
    CLUSTER_QUEUE,
    LOCAL_QUEUE,
    ADMISSION_POLICY,
    POLICY_BINDING,
    MUTATING_POLICY,
    MUTATING_BINDING,
)
API_VERSIONS = {
    NAMESPACE: "v1",
    PRIORITY_CLASS: SCHEDULING_API,
    WORKLOAD_PRIORITY_CLASS: KUEUE_API,
    RESOURCE_FLAVOR: KUEUE_API,
    COHORT: KUEUE_API,
    CLUSTER_QUEUE: KUEUE_API,
    LOCAL_QUEUE: KUEUE_API,
    ADMISSION_POLICY: ADMISSION_API,
    POLICY_BINDING: ADMISSION_API,
    MUTATING_POLICY: MUTATING_API,
    MUTATING_BINDING: MUTATING_API,
}
NAMESPACED = {LOCAL_QUEUE}
# Kinds Arbiter never deletes: a namespace holds the teams' own workloads.
NEVER_PRUNED = {NAMESPACE}

GPU_RESOURCE = "nvidia.com/gpu"
FIELD_MANAGER = "arbiter"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "arbiter"
REVISION_LABEL = "arbiter.governance/rules-revision"
SOURCE_ANNOTATION = "arbiter.governance/source"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
MAX_PRIORITY = 1_000_000_000

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# Leaves of these names are quantities; these paths end in a map or list kept as one value.
QUANTITY_FIELDS = {"nominalQuota", "borrowingLimit", "lendingLimit", "weight"}
ATOMIC_FIELDS = {
    "nodeLabels",
    "nodeTaints",
    "tolerations",
    "namespaceSelector",
    "coveredResources",
    "matchConstraints",
    "matchResources",
    "validations",
    "validationActions",
    "matchConditions",
    "mutations",
}
OPTIONAL_LIMITS = ("borrowingLimit", "lendingLimit")
# Top-level optional fields (``""`` when absent) per kind.
OPTIONAL_SPEC = {
    CLUSTER_QUEUE: ("cohortName",),
    COHORT: ("parentName",),
    RESOURCE_FLAVOR: ("nodeLabels", "nodeTaints", "tolerations"),
}
# The fields outside ``spec`` that Arbiter sets, per kind.
TOP_FIELDS = {
    PRIORITY_CLASS: ("value", "description", "preemptionPolicy", "globalDefault"),
    WORKLOAD_PRIORITY_CLASS: ("value", "description"),
}

_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
QUANTITY = re.compile(
    r"^(?P<number>[+-]?(\d+(\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?(\d+(\.\d*)?|\.\d+))?$"
)


def parse_quantity(value: Any) -> Decimal | None:
    """A Kubernetes quantity as a number (``"12000m"`` → 12); ``None`` when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = QUANTITY.match(str(value).strip())
    if not match:
        return None
    try:
        number = Decimal(match["number"])
        suffix = match["suffix"] or ""
        if suffix[:1] in ("e", "E"):
            return number * Decimal(10) ** Decimal(suffix[1:])
        return number * _SUFFIXES[suffix]
    except (InvalidOperation, KeyError):
        return None


def format_quantity(number: Decimal) -> str:
    """The plain decimal form: 12, 0.5, 1500 (no exponent, no trailing zeros)."""
    text = format(number, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def normalise_quantity(value: Any) -> str:
    if type(value) is str:
        # A sync's objects share a handful of quantities ("0", "4", ...): each read once.
        known = _NORMALISED.get(value)
        if known is None:
            known = _normalise(value)
            if len(_NORMALISED) < 10_000:
                _NORMALISED[value] = known
        return known
    return _normalise(value)


def _normalise(value: Any) -> str:
    number = parse_quantity(value)
    return str(value) if number is None else format_quantity(number)


# Quantities normalised (bounded).
_NORMALISED: dict[str, str] = {}


def k8s_name(slug: str) -> str:
    """A slug as a Kubernetes name: lowercase, ``_`` as ``-`` (Django slugs allow both)."""
    return slug.lower().replace("_", "-")


def object_key(kind: str, name: str, namespace: str = "") -> str:
    """The name of an object in a ``State``: ``namespace/name`` for namespaced kinds."""
    return f"{namespace}/{name}" if kind in NAMESPACED else name


def split_key(kind: str, key: str) -> tuple[str, str]:
    """``(namespace, name)`` of an object key."""
    if kind in NAMESPACED:
        namespace, _sep, name = key.partition("/")
        return namespace, name
    return "", key


def manifest_key(manifest: dict[str, Any]) -> str:
    meta = manifest.get("metadata", {})
    return object_key(manifest["kind"], meta.get("name", ""), meta.get("namespace", ""))


def is_managed(obj: dict[str, Any]) -> bool:
    """Arbiter's object: it carries Arbiter's label, or Arbiter's field manager applied it (so
    an object whose label someone removed by hand is still Arbiter's, and the sync puts the
    label back; a hand-made object of the same name has neither)."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    if labels.get(MANAGED_BY) == MANAGED_BY_VALUE:
        return True
    return any(
        entry.get("manager") == FIELD_MANAGER and entry.get("operation") == "Apply"
        for entry in meta.get("managedFields") or []
    )


# --- flattening ---------------------------------------------------------------------------------


# ``json.dumps(value, sort_keys=True, separators=(",", ":"))``, with one encoder for every
# call (``dumps`` makes one per call: a fifth of flattening 100,000 objects).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


def _canonical(value: Any) -> str:
    if value is None or value == {} or value == []:
        return ""
    return _CANONICAL(value)


def _scalar(name: str, value: Any) -> str:
    if value is None:
        return ""
    if name in QUANTITY_FIELDS:
        return normalise_quantity(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _flatten(value: Any, path: str, name: str, out: dict[str, str]) -> None:
    if name in ATOMIC_FIELDS:
        out[path] = _canonical(value)
    elif isinstance(value, dict):
        for key in sorted(value):
            item = value[key]
            if type(item) is str and key not in QUANTITY_FIELDS and key not in ATOMIC_FIELDS:
                # A plain text leaf (most of them), as ``_scalar`` writes it, without a call.
                out[f"{path}.{key}" if path else key] = item
            else:
                _flatten(item, f"{path}.{key}" if path else key, key, out)
    elif isinstance(value, list):
        if value and all(isinstance(item, dict) and "name" in item for item in value):
            out[path] = ",".join(str(item["name"]) for item in value)
            for item in value:
                item_path = f"{path}[{item['name']}]"
                rest = {k: v for k, v in item.items() if k != "name"}
                if name == "resources":
                    for limit in OPTIONAL_LIMITS:
                        rest.setdefault(limit, None)
                for key in sorted(rest):
                    _flatten(rest[key], f"{item_path}.{key}", key, out)
        elif value and all(isinstance(item, dict) for item in value):
            for index, item in enumerate(value):
                _flatten(item, f"{path}[{index}]", name, out)
        else:
            out[path] = _canonical(value)
    else:
        out[path] = _scalar(name, value)


MANAGED_BY_FIELD = f"metadata.labels[{MANAGED_BY}]"


def flatten(obj: dict[str, Any]) -> dict[str, str]:
    """The fields Arbiter manages of one object, as ``{path: normalised value}``: its spec (or
    top-level fields), and Arbiter's label ``app.kubernetes.io/managed-by``, which is what puts
    a namespace under Kueue's and Arbiter's rules (removing it is drift, restored by a sync)."""
    kind = obj.get("kind", "")
    out: dict[str, str] = {
        MANAGED_BY_FIELD: str(((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY, ""))
    }
    if kind in TOP_FIELDS:
        for name in TOP_FIELDS[kind]:
            _flatten(obj.get(name), name, name, out)
        if kind == PRIORITY_CLASS:
            out["globalDefault"] = out.get("globalDefault") or "false"
            out["preemptionPolicy"] = out.get("preemptionPolicy") or "PreemptLowerPriority"
        return out
    if kind == NAMESPACE:
        return out
    spec = dict(obj.get("spec") or {})
    for name in OPTIONAL_SPEC.get(kind, ()):
        spec.setdefault(name, None)
    _flatten(spec, "spec", "spec", out)
    return out


def values_equal(name: str, live: str, desired: str) -> bool:
    leaf = name.rsplit(".", 1)[-1]
    if leaf in QUANTITY_FIELDS and live and desired:
        return parse_quantity(live) == parse_quantity(desired)
    return live == desired
