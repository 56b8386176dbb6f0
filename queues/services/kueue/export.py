"""Writing the desired objects as YAML files for GitOps: one file per object, stable.

File names are ``<NN>-<kind>-<name>.yaml`` (``NN`` the creation order of the kind, so that
``kubectl apply -f DIR`` creates namespaces and flavors before the queues that use them;
``<namespace>.<name>`` for namespaced objects). Keys are sorted and the formatting is fixed,
so the same rules give the same bytes. A file whose object did not change except for the
rules revision label is left as it is, so the repository's diff shows only real changes;
files of Arbiter-managed objects no longer desired are removed. Other files are never
touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.utils.translation import gettext as _

from queues.schedulers.backends import SchedulerError
from queues.schedulers.kueue.desired import DesiredObjects, Manifest
from queues.schedulers.kueue.values import KINDS, NAMESPACED, REVISION_LABEL, is_managed

FILE_NAME = re.compile(r"^\d\d-[a-z]+-[a-z0-9.-]+\.yaml$")


@dataclass
class ExportResult:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def file_name(manifest: Manifest) -> str:
    kind = manifest["kind"]
    meta = manifest["metadata"]
    name = f"{meta['namespace']}.{meta['name']}" if kind in NAMESPACED else meta["name"]
    return f"{KINDS.index(kind) + 1:02d}-{kind.lower()}-{name}.yaml"


def dump(manifest: Manifest) -> str:
    return yaml.safe_dump(
        manifest, sort_keys=True, default_flow_style=False, allow_unicode=True, width=100
    )


def _without_revision(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj
    copy = {**obj, "metadata": {**(obj.get("metadata") or {})}}
    labels = {
        k: v for k, v in (copy["metadata"].get("labels") or {}).items() if k != REVISION_LABEL
    }
    copy["metadata"]["labels"] = labels
    return copy


def export_objects(objects: DesiredObjects, directory: Path) -> ExportResult:
    """Write ``objects`` into ``directory`` (which must exist and be writable)."""
    if not directory.is_dir():
        raise SchedulerError(_("The export directory %(dir)s does not exist.") % {"dir": directory})
    result = ExportResult()
    wanted = {}
    for manifest in objects.manifests:
        wanted[file_name(manifest)] = manifest
    try:
        for name, manifest in sorted(wanted.items()):
            path = directory / name
            if path.exists():
                try:
                    old = yaml.safe_load(path.read_text())
                except yaml.YAMLError:
                    old = None
                if _without_revision(old) == _without_revision(manifest):
                    result.unchanged.append(name)
                    continue
            path.write_text(dump(manifest))
            result.written.append(name)
        for path in sorted(directory.iterdir()):
            if path.name in wanted or not FILE_NAME.match(path.name) or not path.is_file():
                continue
            try:
                old = yaml.safe_load(path.read_text())
            except yaml.YAMLError:
                continue
            if isinstance(old, dict) and is_managed(old):
                path.unlink()
                result.removed.append(path.name)
    except OSError as error:
        raise SchedulerError(
            _("Cannot write the export into %(dir)s: %(error)s")
            % {"dir": directory, "error": error}
        ) from error
    return result


def read_exported(directory: Path) -> list[dict[str, Any]]:
    """The objects of an export directory, in file order (for tests and dry runs)."""
    return [
        yaml.safe_load(path.read_text())
        for path in sorted(directory.iterdir())
        if FILE_NAME.match(path.name)
    ]
