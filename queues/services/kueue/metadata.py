"""The metadata of a generated object: its API version, name, namespace and labels.

Checked by Arbiter itself rather than by the CRD schemas (which leave ``metadata`` to the
API server): the same rules as the API server's, with messages naming the field.
``_metadata_fine`` answers the common case (nothing wrong) without building the violations.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.utils.translation import gettext as _

from governance.models.resources import LABEL_KEY_RE, LABEL_VALUE_RE
from queues.schedulers.kueue.values import (
    API_VERSIONS,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    NAMESPACE,
    NAMESPACED,
)

METADATA_FIELDS = {"name", "namespace", "labels", "annotations"}


def _metadata_violations(manifest: dict[str, Any]) -> Iterator[tuple[str, str]]:
    kind = manifest.get("kind", "")
    meta = manifest.get("metadata")
    if manifest.get("apiVersion") != API_VERSIONS.get(kind):
        yield "apiVersion", _("must be %(version)s") % {"version": API_VERSIONS.get(kind, "?")}
    if not isinstance(meta, dict):
        yield "metadata", _("is required")
        return
    for extra in sorted(set(meta) - METADATA_FIELDS):
        yield f"metadata.{extra}", _("field not declared in schema")
    name = str(meta.get("name") or "")
    if kind == NAMESPACE:
        if not DNS_LABEL.match(name) or len(name) > 63:
            yield (
                "metadata.name",
                _(
                    "“%(name)s” is not a valid namespace name: a lowercase RFC 1123 label "
                    "(letters, digits, '-'; at most 63 characters)"
                )
                % {"name": name},
            )
    elif not DNS_SUBDOMAIN.match(name) or len(name) > 253:
        yield (
            "metadata.name",
            _(
                "“%(name)s” is not a valid name: a lowercase RFC 1123 subdomain (letters, "
                "digits, '-', '.'; at most 253 characters)"
            )
            % {"name": name},
        )
    namespace = meta.get("namespace")
    if kind in NAMESPACED and not namespace:
        yield "metadata.namespace", _("is required for a namespaced object")
    if kind not in NAMESPACED and namespace:
        yield "metadata.namespace", _("must be empty for a cluster-scoped object")
    for key, value in (meta.get("labels") or {}).items():
        if (key, value) in _VALID_LABELS:
            continue  # the same few labels on every object: each pair checked once
        if not LABEL_KEY_RE.match(str(key)) or not LABEL_VALUE_RE.match(str(value)):
            yield f"metadata.labels.{key}", _("“%(value)s” is not a valid label") % {"value": value}
        elif isinstance(key, str) and isinstance(value, str) and len(_VALID_LABELS) < 10_000:
            _VALID_LABELS.add((key, value))


# Label pairs found valid (bounded: a sync's objects share a handful).
_VALID_LABELS: set[tuple[str, str]] = set()


def _metadata_fine(manifest: dict[str, Any], kind: str) -> bool:
    """Whether ``_metadata_violations`` finds nothing, answered without building its
    generator (the common case); False when unsure (it then looks)."""
    meta = manifest.get("metadata")
    if type(meta) is not dict or manifest.get("apiVersion") != API_VERSIONS.get(kind):
        return False
    if not meta.keys() <= METADATA_FIELDS:
        return False
    name = meta.get("name")
    if type(name) is not str:
        return False
    if kind == NAMESPACE:
        if len(name) > 63 or not DNS_LABEL.match(name):
            return False
    elif len(name) > 253 or not DNS_SUBDOMAIN.match(name):
        return False
    if bool(meta.get("namespace")) != (kind in NAMESPACED):
        return False
    labels = meta.get("labels")
    if labels:
        if type(labels) is not dict:
            return False
        try:
            if not labels.items() <= _VALID_LABELS:  # each pair found valid before
                return False
        except TypeError:  # a value that is no key of a set: let it look
            return False
    return True
