"""The admission policies of a cluster's namespaces: the tiers a project's workloads may
name (and the one they are given), and GPUs only through Kueue."""

from __future__ import annotations

from typing import Any

from ..values import (
    ADMISSION_POLICY,
    GPU_RESOURCE,
    MANAGED_BY,
    MANAGED_BY_VALUE,
    MUTATING_BINDING,
    MUTATING_POLICY,
    NAMESPACE_NAME_LABEL,
    POLICY_BINDING,
)
from .objects import (
    Manifest,
    _metadata,
    _object,
)

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


def _names_no_tier(default: str) -> list[dict[str, str]]:
    """The mutating policy's condition: the object names no tier."""
    return [
        {
            "name": "names-no-tier",
            "expression": f"!({_HAS_TIER}) && (!has({_POD}.priorityClassName)"
            + _defaulted_pod(default)
            + ")",
        }
    ]


def _label_mutation(own: str) -> list[dict[str, Any]]:
    """The mutating policy's patch: the tier label ``own``."""
    return [
        {
            "patchType": "ApplyConfiguration",
            "applyConfiguration": {
                "expression": "Object{metadata: Object.metadata{labels: "
                f"{{'{TIER_LABEL}': '{own}'}}}}}}"
            },
        }
    ]


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
                "matchConditions": _names_no_tier(default),
                "mutations": _label_mutation(own),
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
