"""The layering rules of ``docs/architecture.md``, checked on every import of the four apps.

Every ``import`` and ``from … import`` (at the top of a module or inside a function) is read
from the source with ``ast``; relative imports are resolved. The rules:

1. Apps import one way: ``queues`` and ``approvals`` may import ``governance``; ``reports``
   may import every app; ``governance`` imports none of the others, and nothing imports
   ``reports``.
2. Another app imports ``governance`` only through its public modules: ``models``,
   ``selectors``, ``services``, ``forms`` and the web and API toolkit ``toolkit`` — never its
   ``views``, ``apis``, ``admin``, ``urls`` or ``tasks``, and never a private (``_name``) module.
3. Within every app, layers import downwards only: ``models`` < ``selectors`` < ``services``
   (and ``tasks``, which call services, and which services queue) < ``forms`` and ``toolkit``
   < ``views``, ``apis``, ``admin``, commands and the project's wiring.

The checker is also run on small made-up modules, so that a rule it stops enforcing fails.
"""

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings

APPS = ("governance", "queues", "approvals", "reports")
# Which apps each app may import (besides itself).
MAY_IMPORT = {
    "governance": set(),
    "queues": {"governance"},
    "approvals": {"governance"},
    "reports": {"governance", "queues", "approvals"},
}
# governance's modules another app may import.
PUBLIC = {"models", "selectors", "services", "forms", "toolkit"}
# The rank of each layer: a module imports only layers of its rank or lower.
RANK = {
    "models": 0,
    "selectors": 1,
    # queues.replay: the what-if engine (pure) and its adapter, which reads the rules and the
    # evidence like a selector; the services (a change's replay, the demo's history) call it.
    "replay": 1,
    # queues.schedulers: what the rules compile to in each scheduler (pure); the services
    # that sync and the selectors that answer where a job would run both read it.
    "schedulers": 1,
    "services": 2,
    "tasks": 2,
    "forms": 3,
    "toolkit": 3,
}
TOP = 4  # views, apis, admin, urls, management commands, settings, …
# Imports that break rule 3 today, each with the reason it stays for now. An entry that no
# longer occurs fails the test, so that the list only shrinks.
KNOWN: dict[tuple[str, str], str] = {}


def known(module: str, imported: str) -> bool:
    return any(
        (module == mine or module.startswith(mine + "."))
        and (imported == theirs or imported.startswith(theirs + "."))
        for mine, theirs in KNOWN
    )


@dataclass(frozen=True)
class Problem:
    module: str
    imported: str
    rule: str

    def __str__(self) -> str:
        return f"{self.module} imports {self.imported}: {self.rule}"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, *, is_package: bool) -> set[str]:
    """Every module ``source`` imports (``from a import b`` counts ``a`` and ``a.b``)."""
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            found.add(origin)
            found.update(f"{origin}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in APPS}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def rank(module: str) -> int:
    return RANK.get(layer(module), TOP)


def problems_of(module: str, imported: set[str], known_modules: set[str]) -> list[Problem]:
    app = module.split(".")[0]
    found: list[Problem] = []
    for name in sorted(imported):
        if any(other.startswith(name + ".") for other in imported):
            continue  # ``from queues import services``: judged as ``queues.services``
        # ``from governance.models import Quota`` names a class, not a module: judge the
        # longest prefix that is a module (or the package itself).
        while name not in known_modules and "." in name:
            name = name.rpartition(".")[0]
        other = name.split(".")[0]
        if other != app:
            if other not in MAY_IMPORT[app]:
                found.append(Problem(module, name, f"{app} may not import {other}"))
                continue
            parts = name.split(".")
            if other == "governance" and len(parts) > 1:
                if parts[1] not in PUBLIC:
                    found.append(Problem(module, name, "not a public module of governance"))
                elif any(part.startswith("_") for part in parts[1:]):
                    found.append(Problem(module, name, "a private module of governance"))
            continue
        if name != app and rank(name) > rank(module) and not known(module, name):
            found.append(
                Problem(module, name, f"{layer(module) or app} may not import {layer(name)}")
            )
    return found


def app_modules() -> dict[str, tuple[str, bool]]:
    root = Path(settings.BASE_DIR)
    modules = {}
    for app in APPS:
        for path in (root / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            modules[module_name(path, root)] = (path.read_text(), path.name == "__init__.py")
    return modules


def all_problems(
    modules: dict[str, tuple[str, bool]], known_modules: set[str] | None = None
) -> list[Problem]:
    known_modules = known_modules or set(modules)
    found: set[Problem] = set()
    for module, (source, is_package) in sorted(modules.items()):
        imported = imports_of(source, module, is_package=is_package)
        found.update(problems_of(module, imported, known_modules))
    return sorted(found, key=str)


def test_the_apps_keep_the_layering_rules():
    modules = app_modules()
    # A wrong root would read no module and find no problem: each app's layers must be read.
    for layer in ("models", "selectors", "services", "views"):
        for app in APPS:
            assert any(m.startswith(f"{app}.{layer}") for m in modules), f"{app}.{layer}"
    assert [str(problem) for problem in all_problems(modules)] == []


def test_the_known_exceptions_still_occur():
    modules = app_modules()
    for mine, theirs in KNOWN:
        assert any(
            known(module, name)
            for module, (source, is_package) in modules.items()
            if module == mine or module.startswith(mine + ".")
            for name in imports_of(source, module, is_package=is_package)
            if name == theirs or name.startswith(theirs + ".")
        ), (mine, theirs)


@pytest.mark.parametrize(
    "module, source, rule",
    [
        ("governance.models.quotas", "from queues.models import Cluster", "may not import"),
        ("queues.services.sync", "from reports import selectors", "may not import reports"),
        ("approvals.views", "from governance.views import paginate", "not a public module"),
        ("queues.apis", "from governance.apis._common import NOT_FOUND", "not a public module"),
        ("reports.views", "from governance.services._history import x", "private module"),
        ("governance.selectors.rules", "from governance import services", "may not import"),
        ("queues.models.jobs", "from ..selectors import wait", "may not import selectors"),
        (
            "queues.selectors.placement.compiled",
            "from queues.services.sync import pool_gres_types",
            "selectors may not import services",
        ),
        ("queues.schedulers.slurm.desired", "from queues import services", "may not import"),
        ("approvals.services.requests", "from approvals.views import x", "may not import views"),
        ("governance.toolkit.web", "from governance.views import quotas", "may not import"),
    ],
)
def test_a_violating_import_is_reported(module, source, rule):
    known_modules = {*app_modules(), module}
    problems = [str(problem) for problem in all_problems({module: (source, False)}, known_modules)]
    assert len(problems) == 1 and rule in problems[0], problems


def test_public_imports_pass():
    module = "queues.apis.placement"
    source = (
        "from governance.models import Quota\nfrom governance.toolkit.api import NOT_FOUND\n"
        "from governance import selectors\nfrom queues.services import placement\n"
    )
    assert all_problems({module: (source, False)}, {*app_modules(), module}) == []
