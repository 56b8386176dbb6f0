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
from collections.abc import Iterable
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


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# ``json.dumps(value, sort_keys=True, separators=(",", ":"))``, with one C encoder made once
# (``dumps``, and ``JSONEncoder.encode`` too, make one per call: a third of the encoding of
# the 100,000 objects of 10,000 projects). ``None``: no C encoder (another interpreter).
_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODER: Any = (
    _MAKE_ENCODER(
        None, _not_json, json.encoder.encode_basestring_ascii, None, ":", ",", True, False, True
    )
    if _MAKE_ENCODER is not None
    else None
)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


def _canonical(value: Any) -> str:
    if value is None or value == {} or value == []:
        return ""
    if _C_ENCODER is None or type(value) is str:
        return _CANONICAL(value)
    return "".join(_C_ENCODER(value, 0))


# Values kept per field name by a ``Memo`` (the most recent first).
_MEMO_SIZE = 8


def _text_only(value: Any) -> bool:
    """Only maps with text keys, lists, text and null: no number or boolean."""
    if type(value) is dict:
        return all(type(key) is str and _text_only(item) for key, item in value.items())
    if type(value) is list:
        return all(_text_only(item) for item in value)
    return value is None or type(value) is str


class Memo:
    """What the values flattened so far became, per field name (an atomic field's JSON) or
    path (a map's fields): the objects of one kind share many (every tier policy's
    ``matchConstraints``, a few ``validations``, the queues' ``preemption``, their resource
    groups of a few quota combinations), and an equal value is not flattened or encoded
    again (a map's fields are even the same texts, keys included).

    A value is reused only when equal to one seen, and only when that one holds text alone
    (``==`` takes ``1``, ``1.0`` and ``True`` for one another, their JSON does not). It keeps
    the values it saw: it lives while one set of objects is flattened, which nothing
    changes meanwhile. A field whose values seldom repeat (a namespace's selector) is no
    longer looked up after ``_MEMO_SIZE * 8`` values."""

    __slots__ = ("counts", "seen")

    def __init__(self) -> None:
        # Per field name: [value, what it became, whether it holds text alone (None: not
        # checked yet: checked at its first reuse, as most values are never reused)].
        self.seen: dict[str, list[list[Any]]] = {}
        # Per field name: values kept, values reused.
        self.counts: dict[str, list[int]] = {}

    def get(self, name: str, value: Any) -> Any:
        """What an equal value seen under ``name`` became, or ``None``."""
        counts = self.counts.get(name)
        if counts is None:
            self.counts[name], self.seen[name] = [0, 0], []
            return None
        if counts[0] > _MEMO_SIZE * 8 and counts[1] * 4 < counts[0]:
            return None
        known = self.seen[name]
        for index, entry in enumerate(known):
            if entry[0] == value:
                if entry[2] is None:
                    entry[2] = _text_only(entry[0])
                if not entry[2]:
                    return None
                if index:
                    known.insert(0, known.pop(index))
                counts[1] += 1
                return entry[1]
        return None

    def keep(self, name: str, value: Any, became: Any) -> None:
        self.counts[name][0] += 1
        known = self.seen[name]
        known.insert(0, [value, became, None])
        del known[_MEMO_SIZE:]

    def canonical(self, name: str, value: Any) -> str:
        """``_canonical(value)``."""
        text = self.get(name, value)
        if text is None:
            text = _canonical(value)
            self.keep(name, value, text)
        return str(text)


def _scalar(name: str, value: Any) -> str:
    if value is None:
        return ""
    if name in QUANTITY_FIELDS:
        return normalise_quantity(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _flatten(value: Any, path: str, name: str, out: dict[str, str], memo: Memo) -> None:
    if name in ATOMIC_FIELDS:
        out[path] = memo.canonical(name, value)
    elif type(value) is dict:
        _flatten_tree(value, path, out, memo)
    elif isinstance(value, dict):
        _flatten_map(dict(value), path, out, memo)
    elif isinstance(value, list):
        _flatten_list(value, path, name, out, memo)
    else:
        out[path] = _scalar(name, value)


def _flatten_map(
    value: dict[str, Any],
    path: str,
    out: dict[str, str],
    memo: Memo,
    keys: Iterable[str] | None = None,
) -> None:
    """``value``'s fields under ``path``: its keys, or ``keys`` (sorted; a missing one is
    ``None``)."""
    prefix = f"{path}." if path else ""
    for key in sorted(value) if keys is None else keys:
        item = value.get(key)
        if key in ATOMIC_FIELDS:
            out[prefix + key] = memo.canonical(key, item)
        elif type(item) is str:
            # A plain text leaf (most of them), as ``_scalar`` writes it, without a call.
            out[prefix + key] = normalise_quantity(item) if key in QUANTITY_FIELDS else item
        elif type(item) is dict:
            _flatten_tree(item, prefix + key, out, memo)
        else:
            _flatten(item, prefix + key, key, out, memo)


def _flatten_tree(value: dict[str, Any], path: str, out: dict[str, str], memo: Memo) -> None:
    """A map inside an object, as ``_flatten_map``: its fields are those of an equal map seen
    at the same path, when there is one (the same path texts too: nothing made again)."""
    tree = f"{path}{{}}"  # not a field name: an atomic field's entry
    fields = memo.get(tree, value)
    if fields is None:
        fields = {}
        _flatten_map(value, path, fields, memo)
        memo.keep(tree, value, fields)
    out.update(fields)


def _flatten_list(value: list[Any], path: str, name: str, out: dict[str, str], memo: Memo) -> None:
    if value and all(isinstance(item, dict) and "name" in item for item in value):
        out[path] = ",".join(str(item["name"]) for item in value)
        for item in value:
            keys = {*item, *OPTIONAL_LIMITS} if name == "resources" else set(item)
            keys.discard("name")
            _flatten_map(item, f"{path}[{item['name']}]", out, memo, sorted(keys))
    elif value and all(isinstance(item, dict) for item in value):
        for index, item in enumerate(value):
            _flatten(item, f"{path}[{index}]", name, out, memo)
    else:
        out[path] = _canonical(value)


MANAGED_BY_FIELD = f"metadata.labels[{MANAGED_BY}]"


def flatten(obj: dict[str, Any], memo: Memo | None = None) -> dict[str, str]:
    """The fields Arbiter manages of one object, as ``{path: normalised value}``: its spec (or
    top-level fields), and Arbiter's label ``app.kubernetes.io/managed-by``, which is what puts
    a namespace under Kueue's and Arbiter's rules (removing it is drift, restored by a sync).
    ``memo``: shared by the objects flattened together (``flatten_all``)."""
    memo = Memo() if memo is None else memo
    kind = obj.get("kind", "")
    out: dict[str, str] = {
        MANAGED_BY_FIELD: str(((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY, ""))
    }
    if kind in TOP_FIELDS:
        for name in TOP_FIELDS[kind]:
            _flatten(obj.get(name), name, name, out, memo)
        if kind == PRIORITY_CLASS:
            out["globalDefault"] = out.get("globalDefault") or "false"
            out["preemptionPolicy"] = out.get("preemptionPolicy") or "PreemptLowerPriority"
        return out
    if kind == NAMESPACE:
        return out
    spec = obj.get("spec") or {}
    optional = OPTIONAL_SPEC.get(kind)
    if not isinstance(spec, dict):
        spec = dict(spec)
    _flatten_map(spec, "spec", out, memo, sorted({*spec, *optional}) if optional else None)
    return out


def flatten_all(objects: Iterable[dict[str, Any]]) -> dict[str, dict[str, dict[str, str]]]:
    """Objects flattened together, as ``{kind: {key: fields}}`` (every kind of ``KINDS``)."""
    state: dict[str, dict[str, dict[str, str]]] = {kind: {} for kind in KINDS}
    memo = Memo()
    for obj in objects:
        state.setdefault(obj["kind"], {})[manifest_key(obj)] = flatten(obj, memo)
    return state


def values_equal(name: str, live: str, desired: str) -> bool:
    leaf = name.rsplit(".", 1)[-1]
    if leaf in QUANTITY_FIELDS and live and desired:
        return parse_quantity(live) == parse_quantity(desired)
    return live == desired
