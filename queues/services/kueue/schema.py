"""Validating generated objects before anything is applied.

Three tiers, all offline:

1. **Structure**: each Kueue object against the ``v1beta2`` ``openAPIV3Schema`` of its CRD
   (from ``ARBITER_KUEUE_CRDS_DIR``, by default the CRDs shipped in ``queues/kueue_crds``),
   turned into a strict JSON Schema: every object with ``properties`` gets
   ``additionalProperties: false`` unless ``x-kubernetes-preserve-unknown-fields`` (as the
   API server's ``fieldValidation=Strict``), ``nullable`` allows ``null``,
   ``x-kubernetes-int-or-string`` allows both, ``x-kubernetes-list-type: set`` items are
   unique and ``map`` items unique by their keys, ``int32``/``int64`` formats are ranges.
   PriorityClass and Namespace get the same treatment from small built-in schemas.
2. **Rules** (``rules.py``): the CRDs' CEL rules (``x-kubernetes-validations``; Kubernetes
   before 1.25 ignores them) and Kueue's webhook checks, written out in Python with Kueue's own
   messages; PriorityClass rules of the API server (value ≤ 1,000,000,000, no ``system-``
   name, one global default). Transition rules (``oldSelf``) need the stored object and
   are left to the server.
3. **Across objects**: unique names, queues naming flavors and cluster queues that exist.

Every violation names the object, the field and the rule of Arbiter that produced it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.utils.translation import gettext as _
from jsonschema import Draft7Validator, validators
from jsonschema.exceptions import ValidationError as SchemaError

from queues.schedulers.backends import SchedulerError
from queues.schedulers.kueue.desired import DesiredObjects
from queues.schedulers.kueue.values import (
    ADMISSION_POLICY,
    API_VERSIONS,
    CLUSTER_QUEUE,
    COHORT,
    LOCAL_QUEUE,
    MUTATING_BINDING,
    MUTATING_POLICY,
    NAMESPACE,
    NAMESPACED,
    POLICY_BINDING,
    PRIORITY_CLASS,
    RESOURCE_FLAVOR,
    WORKLOAD_PRIORITY_CLASS,
)

from .codegen import generate_check
from .compiled import Check
from .metadata import _metadata_fine, _metadata_violations
from .rules import RULES

SHIPPED_CRDS = Path(__file__).resolve().parents[2] / "kueue_crds"
KUEUE_KINDS = (WORKLOAD_PRIORITY_CLASS, RESOURCE_FLAVOR, COHORT, CLUSTER_QUEUE, LOCAL_QUEUE)
INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class Violation:
    kind: str
    name: str
    path: str
    message: str
    source: str = ""

    def __str__(self) -> str:
        where = f"{self.kind} {self.name}" + (f" {self.path}" if self.path else "")
        text = f"{where}: {self.message}"
        if not self.source:
            return text
        return _("%(error)s (from %(rule)s)") % {"error": text, "rule": self.source}


class KueueValidationError(SchedulerError):
    """Generated objects break a schema or rule: nothing is applied."""

    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        shown = "; ".join(str(v) for v in violations[:20])
        more = len(violations) - 20
        suffix = (" " + _("(and %(count)d more)") % {"count": more}) if more > 0 else ""
        super().__init__(
            _("%(count)d generated objects break Kueue's or Kubernetes' rules: %(list)s")
            % {"count": len(violations), "list": shown + suffix}
        )


# --- CRDs ----------------------------------------------------------------------------------------


def crds_dir() -> Path:
    configured = getattr(settings, "ARBITER_KUEUE_CRDS_DIR", "") or ""
    return Path(configured) if configured else SHIPPED_CRDS


def load_crds(directory: Path | None = None) -> dict[str, dict[str, Any]]:
    """The CRD documents in ``directory`` by kind; a clear error when one is missing."""
    directory = directory or crds_dir()
    return dict(_load_crds(str(directory)))


@lru_cache(maxsize=4)
def _load_crds(directory: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    path = Path(directory)
    if not path.is_dir():
        raise SchedulerError(
            _("The Kueue CRD directory %(dir)s does not exist (ARBITER_KUEUE_CRDS_DIR).")
            % {"dir": directory}
        )
    found: dict[str, dict[str, Any]] = {}
    for file in sorted(path.glob("*.y*ml")):
        try:
            documents = list(yaml.safe_load_all(file.read_text()))
        except (OSError, yaml.YAMLError) as error:
            raise SchedulerError(
                _("Cannot read the CRD file %(file)s: %(error)s")
                % {"file": file.name, "error": error}
            ) from error
        for doc in documents:
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                kind = doc.get("spec", {}).get("names", {}).get("kind")
                if kind:
                    found[kind] = doc
    missing = [kind for kind in KUEUE_KINDS if kind not in found]
    if missing:
        raise SchedulerError(
            _("The Kueue CRD directory %(dir)s has no CRD for %(kinds)s.")
            % {"dir": directory, "kinds": ", ".join(missing)}
        )
    return tuple(sorted(found.items()))


def version_schema(crd: dict[str, Any], version: str = "v1beta2") -> dict[str, Any]:
    for entry in crd.get("spec", {}).get("versions", []):
        if entry.get("name") == version:
            return entry["schema"]["openAPIV3Schema"]
    raise SchedulerError(
        _("The CRD %(name)s does not serve %(version)s.")
        % {"name": crd.get("metadata", {}).get("name", "?"), "version": version}
    )


def structural_to_jsonschema(schema: Any) -> Any:
    """A Kubernetes structural schema as a strict JSON Schema (see the module docstring)."""
    if isinstance(schema, list):
        return [structural_to_jsonschema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("description", "x-kubernetes-validations", "default", "example"):
            continue
        if key in ("properties", "patternProperties", "definitions"):
            out[key] = {name: structural_to_jsonschema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") or key in ("anyOf", "allOf", "oneOf"):
            out[key] = structural_to_jsonschema(value)
        else:
            out[key] = value
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _list_map_keys(validator: Any, keys: list[str], instance: Any, schema: Any) -> Iterator:
    if not isinstance(instance, list):
        return
    seen: set[tuple] = set()
    for item in instance:
        if not isinstance(item, dict):
            continue
        key = tuple(str(item.get(name)) for name in keys)
        if key in seen:
            yield SchemaError(
                _("duplicate entry with %(keys)s")
                % {"keys": ", ".join(f"{k}={v}" for k, v in zip(keys, key, strict=True))}
            )
        seen.add(key)


# What ``codegen`` may write out inline: the check fails exactly when two of the list's objects
# have the same ``str()`` of each key.
_list_map_keys.unique_by_keys = True  # type: ignore[attr-defined]


def _int_format(validator: Any, fmt: str, instance: Any, schema: Any) -> Iterator:
    bounds = INT_RANGES.get(fmt)
    if (
        bounds
        and isinstance(instance, int)
        and not isinstance(instance, bool)
        and not bounds[0] <= instance <= bounds[1]
    ):
        yield SchemaError(
            _("%(value)s is out of the %(format)s range") % {"value": instance, "format": fmt}
        )


StrictValidator = validators.extend(
    Draft7Validator,
    {"x-kubernetes-list-map-keys": _list_map_keys, "format": _int_format},
)

# Built-in kinds: only the fields Arbiter writes, strictly.


def _object_schema(*, required: Sequence[str] = (), **fields: Any) -> dict[str, Any]:
    """A core object Arbiter writes: apiVersion, kind and metadata, plus ``fields`` (each a
    schema; ``required`` names those it must have), and nothing else."""
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", *required],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            **fields,
        },
    }


def _spec(required: Sequence[str], **fields: Any) -> dict[str, Any]:
    """A ``spec`` with exactly ``fields``, of which ``required`` must be there."""
    return {
        "type": "object",
        "required": list(required),
        "additionalProperties": False,
        "properties": fields,
    }


PRIORITY_CLASS_SCHEMA = _object_schema(
    required=["value"],
    value={"type": "integer", "format": "int32"},
    globalDefault={"type": "boolean"},
    description={"type": "string"},
    preemptionPolicy={"type": "string", "enum": ["PreemptLowerPriority", "Never"]},
)
NAMESPACE_SCHEMA = _object_schema()
# Arbiter's tier policies (validating, and mutating): only the fields it writes (the API
# server checks the CEL).
ADMISSION_POLICY_SCHEMA = _object_schema(
    required=["spec"],
    spec=_spec(
        ["failurePolicy", "matchConstraints", "validations"],
        failurePolicy={"enum": ["Fail"]},
        matchConstraints={"type": "object"},
        validations={"type": "array", "minItems": 1},
    ),
)
POLICY_BINDING_SCHEMA = _object_schema(
    required=["spec"],
    spec=_spec(
        ["policyName", "validationActions", "matchResources"],
        policyName={"type": "string"},
        validationActions={"type": "array", "items": {"enum": ["Deny"]}},
        matchResources={"type": "object"},
    ),
)
MUTATING_POLICY_SCHEMA = _object_schema(
    required=["spec"],
    spec=_spec(
        ["failurePolicy", "reinvocationPolicy", "matchConstraints", "mutations"],
        failurePolicy={"enum": ["Fail"]},
        reinvocationPolicy={"enum": ["Never"]},
        matchConstraints={"type": "object"},
        matchConditions={"type": "array"},
        mutations={
            "type": "array",
            "minItems": 1,
            "items": _spec(
                ["patchType", "applyConfiguration"],
                patchType={"enum": ["ApplyConfiguration"]},
                applyConfiguration=_spec(
                    ["expression"], expression={"type": "string", "minLength": 1}
                ),
            ),
        },
    ),
)
MUTATING_BINDING_SCHEMA = _object_schema(
    required=["spec"],
    spec=_spec(
        ["policyName", "matchResources"],
        policyName={"type": "string"},
        matchResources={"type": "object"},
    ),
)


@lru_cache(maxsize=4)
def _validators(directory: str) -> dict[str, Any]:
    crds = dict(_load_crds(directory))
    result = {
        kind: StrictValidator(structural_to_jsonschema(version_schema(crds[kind])))
        for kind in KUEUE_KINDS
    }
    result[PRIORITY_CLASS] = StrictValidator(PRIORITY_CLASS_SCHEMA)
    result[NAMESPACE] = StrictValidator(NAMESPACE_SCHEMA)
    result[ADMISSION_POLICY] = StrictValidator(ADMISSION_POLICY_SCHEMA)
    result[POLICY_BINDING] = StrictValidator(POLICY_BINDING_SCHEMA)
    result[MUTATING_POLICY] = StrictValidator(MUTATING_POLICY_SCHEMA)
    result[MUTATING_BINDING] = StrictValidator(MUTATING_BINDING_SCHEMA)
    return result


@lru_cache(maxsize=4)
def _compiled(directory: str) -> dict[str, Check]:
    """Each kind's compiled check (see above), built once per CRD directory."""
    validators = _validators(directory)
    return {kind: generate_check(v.schema, StrictValidator) for kind, v in validators.items()}


# --- validating ----------------------------------------------------------------------------------


def _path(parts: Iterable[Any], obj: Any) -> str:
    text = ""
    node = obj
    for part in parts:
        if isinstance(part, int):
            name = (
                node[part].get("name")
                if isinstance(node, list) and isinstance(node[part], dict)
                else None
            )
            text += f"[{name}]" if name else f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            node = None
    return text


def object_violations(
    manifest: dict[str, Any], directory: Path | None = None
) -> list[tuple[str, str]]:
    """``(path, message)`` of everything wrong with one object on its own."""
    where = str(directory or crds_dir())
    return _object_violations(manifest, _validators(where), _compiled(where))


def _object_violations(
    manifest: dict[str, Any], checks: dict[str, Any], compiled: dict[str, Check]
) -> list[tuple[str, str]]:
    kind = manifest.get("kind", "")
    if kind not in checks:
        return [("kind", _("Arbiter does not generate %(kind)s objects") % {"kind": kind})]
    found = [] if _metadata_fine(manifest, kind) else list(_metadata_violations(manifest))
    # The compiled check passes what jsonschema passes, at a fraction of the cost; what it
    # does not pass, jsonschema validates again for the messages.
    if not compiled[kind](manifest):
        errors = checks[kind].iter_errors(manifest)
        for error in sorted(errors, key=lambda e: list(e.absolute_path)):
            if list(error.absolute_path)[:1] == ["metadata"] and error.validator != "type":
                continue
            found.append((_path(error.absolute_path, manifest), error.message))
    if kind in RULES and isinstance(manifest.get("spec", {}), dict):
        found.extend(RULES[kind](manifest))
    return found


def validate(objects: DesiredObjects, directory: Path | None = None) -> list[Violation]:
    """Every violation of every desired object, and of the set as a whole."""
    violations: list[Violation] = []

    def report(kind: str, key: str, path: str, message: str) -> None:
        violations.append(Violation(kind, key, path, message, objects.source(kind, key, path)))

    names: dict[str, set[str]] = {kind: set() for kind in API_VERSIONS}
    # How many objects share a kind and name, for those that do.
    duplicates: dict[tuple[str, str], int] = {}
    defaults = []
    where = str(directory or crds_dir())
    checks, compiled = _validators(where), _compiled(where)
    # The queues, whose references are checked once every name is known.
    queues = []
    for manifest in objects.manifests:
        kind = manifest.get("kind", "")
        # ``manifest_key``, written out (100,000 objects at 10,000 projects).
        meta = manifest.get("metadata", {})
        key = (
            f"{meta.get('namespace', '')}/{meta.get('name', '')}"
            if kind in NAMESPACED
            else meta.get("name", "")
        )
        seen = names.get(kind)
        if seen is None:
            seen = names[kind] = set()
        if key in seen:
            count = duplicates[(kind, key)] = duplicates.get((kind, key), 1) + 1
            if count == 2:
                others = sorted(
                    {
                        s.get("", "")
                        for (k, n), s in objects.sources.items()
                        if k == kind and n == key
                    }
                )
                report(
                    kind,
                    key,
                    "metadata.name",
                    _("two rules produce the same name (%(rules)s)") % {"rules": ", ".join(others)},
                )
        else:
            seen.add(key)
        check, rules = compiled.get(kind), RULES.get(kind)
        if check is not None and _metadata_fine(manifest, kind) and check(manifest):
            # The common case, as _object_violations answers it: only the rules may object.
            spec = manifest.get("spec", {})
            found: Iterable[tuple[str, str]] = (
                rules(manifest) if rules is not None and isinstance(spec, dict) else ()
            )
        else:
            found = _object_violations(manifest, checks, compiled)
        for path, message in found:
            report(kind, key, path, str(message))
        if kind == PRIORITY_CLASS and manifest.get("globalDefault"):
            defaults.append(key)
        elif kind in (CLUSTER_QUEUE, LOCAL_QUEUE):
            queues.append((manifest, kind, key))
    if len(defaults) > 1:
        for key in defaults[1:]:
            report(
                PRIORITY_CLASS,
                key,
                "globalDefault",
                _("only one PriorityClass may be the global default (also %(other)s)")
                % {"other": defaults[0]},
            )
    _references(queues, names, report)
    return violations


def _references(
    queues: list[tuple[dict[str, Any], str, str]],
    names: dict[str, set[str]],
    report: Callable[[str, str, str, str], None],
) -> None:
    """Queues naming flavors, cluster queues and namespaces that are not generated."""
    for manifest, kind, key in queues:
        spec = manifest.get("spec") or {}
        if kind == CLUSTER_QUEUE:
            for g, group in enumerate(spec.get("resourceGroups") or []):
                for flavor in group.get("flavors") or []:
                    if flavor.get("name") not in names[RESOURCE_FLAVOR]:
                        report(
                            kind,
                            key,
                            f"spec.resourceGroups[{g}].flavors[{flavor.get('name')}]",
                            _("names a ResourceFlavor that is not generated"),
                        )
            continue
        if spec.get("clusterQueue") not in names[CLUSTER_QUEUE]:
            report(kind, key, "spec.clusterQueue", _("names a ClusterQueue that is not generated"))
        if manifest["metadata"].get("namespace") not in names[NAMESPACE]:
            report(kind, key, "metadata.namespace", _("names a namespace that is not generated"))


def validate_or_raise(objects: DesiredObjects, directory: Path | None = None) -> None:
    violations = validate(objects, directory)
    if violations:
        raise KueueValidationError(violations)
