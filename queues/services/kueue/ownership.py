"""Who owns what on the cluster: the field managers of a live field (``managedFields``), what a
forced apply takes back and from whom, the values others added that an apply would keep, why a
deleted object is still there, and the one global default PriorityClass."""

from __future__ import annotations

import json
import re
from typing import Any

from django.utils.translation import gettext as _

from queues.schedulers.backends import LiveState, State
from queues.schedulers.kueue.desired import DesiredObjects, Manifest
from queues.schedulers.kueue.values import FIELD_MANAGER, PRIORITY_CLASS, flatten, values_equal

from .schema import KueueValidationError, Violation


def check_default_priority(
    *, desired: State, live: LiveState, objects: DesiredObjects | None
) -> None:
    """Only one PriorityClass can be the global default: refused before anything is applied
    when one that is not Arbiter's already is."""
    mine = [k for k, f in desired.get(PRIORITY_CLASS, {}).items() if f["globalDefault"] == "true"]
    if not mine:
        return
    managed = live.managed.get(PRIORITY_CLASS, set())
    others = [
        key
        for key, fields in live.objects.get(PRIORITY_CLASS, {}).items()
        if fields.get("globalDefault") == "true" and key not in managed and key not in mine
    ]
    if others:
        source = objects.source(PRIORITY_CLASS, mine[0]) if objects else ""
        raise KueueValidationError(
            [
                Violation(
                    PRIORITY_CLASS,
                    mine[0],
                    "globalDefault",
                    _(
                        "PriorityClass %(other)s (not Arbiter's) is already the global "
                        "default: only one default can exist"
                    )
                    % {"other": others[0]},
                    source,
                )
            ]
        )


def takeover_note(owners: dict[str, list[str]]) -> str:
    """What a forced apply takes back, from whom."""
    taken = [
        _("%(field)s from %(managers)s") % {"field": field, "managers": ", ".join(managers)}
        for field, managers in sorted(owners.items())
    ]
    return str(
        _("takes back %(fields)s (fields Arbiter owns, changed by another field manager)")
        % {"fields": "; ".join(taken[:10]) or "-"}
    )


def _replacing(desired: Any, live: Any) -> Any:
    """A merge patch value that turns ``live`` into ``desired``: maps key by key, keys only
    ``live`` has set to null; anything else replaced whole."""
    if isinstance(desired, dict) and isinstance(live, dict):
        patch: dict[str, Any] = {key: None for key in live if key not in desired}
        for key, value in desired.items():
            patch[key] = _replacing(value, live.get(key))
        return patch
    return desired


def leftovers(manifest: Manifest, result: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """What server-side apply would keep beside Arbiter's values (a value another manager
    added to a set such as a binding's ``validationActions``, or to a map): a merge patch of
    the top-level ``spec`` fields concerned, and a note saying what it removes from whom."""
    if not result:
        return {}, ""
    wanted = flatten(manifest)
    found = flatten({**result, "kind": manifest["kind"]})
    differing = [
        path
        for path, value in wanted.items()
        if path.startswith("spec.") and not values_equal(path, found.get(path, ""), value)
    ]
    if not differing:
        return {}, ""
    spec_patch: dict[str, Any] = {}
    removed = []
    for path in differing:
        top = PATH_PART.findall(path)[1][0]
        if top in spec_patch:
            continue
        live_value = (result.get("spec") or {}).get(top)
        spec_patch[top] = _replacing(manifest.get("spec", {}).get(top), live_value)
        owners = field_owners(result, f"spec.{top}")
        removed.append(
            _("spec.%(field)s %(live)s of %(managers)s")
            % {
                "field": top,
                "live": json.dumps(live_value, sort_keys=True)[:200],
                "managers": ", ".join(owners) or "-",
            }
        )
    return {"spec": spec_patch}, str(
        _("restores the values others added: %(values)s") % {"values": "; ".join(removed)}
    )


PATH_PART = re.compile(r"([^.\[\]]+)|\[([^\]]+)\]")


def deletion_blocked(live: LiveState, kind: str, name: str) -> str:
    """Why a deleted object is still there ("" when it is not being deleted): its
    finalizers, and for a Kueue queue the workloads that still hold it."""
    obj = live.extra.get("raw", {}).get(kind, {}).get(name) or {}
    meta = obj.get("metadata") or {}
    if not meta.get("deletionTimestamp"):
        return ""
    status = obj.get("status") or {}
    counts = [
        f"{status[field]} {field}"
        for field in ("admittedWorkloads", "reservingWorkloads", "pendingWorkloads")
        if status.get(field)
    ]
    return str(
        _(
            "Deleted, but still held by finalizer %(finalizers)s (%(workloads)s): it goes once "
            "its workloads finish or are removed; Arbiter does not delete it again."
        )
        % {
            "finalizers": ", ".join(meta.get("finalizers") or []) or "-",
            "workloads": ", ".join(counts) or _("no workload counted"),
        }
    )


def _owns(fields: Any, path: str) -> bool:
    """Whether a ``managedFields`` entry's ``fieldsV1`` covers ``path`` (an atomic list or
    map owned as a whole covers everything under it)."""
    node = fields
    for name, item in PATH_PART.findall(path):
        if not isinstance(node, dict):
            return False
        if node == {}:
            return True
        if name:
            key = f"f:{name}"
            if key not in node:
                return False
            node = node[key]
        else:
            wanted = {f'k:{{"name":"{item}"}}', f"i:{item}"}
            found = next((key for key in node if key in wanted), None)
            if found is None:
                return False
            node = node[found]
    return True


def field_owners(obj: dict[str, Any] | None, field: str) -> list[str]:
    """Managers other than Arbiter whose managed fields cover the field."""
    if not obj or not field:
        return []
    return [
        f"{entry.get('manager', '')} ({entry.get('operation', '')})"
        for entry in (obj.get("metadata") or {}).get("managedFields") or []
        if entry.get("manager") != FIELD_MANAGER and _owns(entry.get("fieldsV1") or {}, field)
    ]
