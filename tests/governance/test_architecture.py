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
   (and ``tasks``, which call services) < ``forms`` and ``toolkit`` < ``views``, ``apis``,
   ``admin``, commands and the project's wiring.
4. No import circle between modules (a service queues a task by its name, never by importing
   the task module, which imports the services); every name a service sends is a task of
   its own app.
5. The settings hooks (``ARBITER_*`` settings naming a callable of another app) and every
   call of another app's services are listed in ``docs/architecture.md``; a hook goes only
   where an import may not (into an app the caller may not import, never ``reports``).

The checker is also run on small made-up modules, so that a rule it stops enforcing fails.
"""

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.utils.module_loading import import_string

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


# --- 4. circles -----------------------------------------------------------------------------

# Import circles still standing, each with its reason; an entry that no longer occurs fails.
KNOWN_CIRCLES: dict[frozenset[str], str] = {}


def import_graph(
    modules: dict[str, tuple[str, bool]], known_modules: set[str] | None = None
) -> dict[str, set[str]]:
    """Each module → the modules it imports (the longest prefix of a name that is a module)."""
    known_modules = known_modules or set(modules)
    graph: dict[str, set[str]] = {}
    for module, (source, is_package) in modules.items():
        imported = imports_of(source, module, is_package=is_package)
        edges = set()
        for name in imported:
            if any(other.startswith(name + ".") for other in imported):
                continue
            while name not in known_modules and "." in name:
                name = name.rpartition(".")[0]
            if name != module and name in known_modules:
                edges.add(name)
        graph[module] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The import circles of ``graph``: its strongly connected parts of two or more modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph.get(module, ())):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            part = set()
            while True:
                other = stack.pop()
                part.add(other)
                if other == module:
                    break
            if len(part) > 1:
                found.append(frozenset(part))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for module in sorted(graph):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found, key=sorted)


def test_no_import_circle():
    found = [
        sorted(part) for part in circles(import_graph(app_modules())) if part not in KNOWN_CIRCLES
    ]
    assert found == []


def test_the_known_circles_still_occur():
    found = circles(import_graph(app_modules()))
    assert [sorted(part) for part in KNOWN_CIRCLES if part not in found] == []


def test_a_circle_is_reported():
    modules = {
        "queues.services": ("from .sync import sync_enqueue", True),
        "queues.services.sync": ("def f():\n    from queues.tasks import sync_cluster", False),
        "queues.tasks": ("from queues import services", False),
    }
    assert circles(import_graph(modules)) == [frozenset(modules)]


def test_a_task_queued_by_name_makes_no_circle():
    modules = {
        "queues.services": ("from .sync import sync_enqueue", True),
        "queues.services.sync": (
            "from governance.services import task_enqueue\n"
            'task_enqueue(task="queues.tasks.sync_cluster")',
            False,
        ),
        "queues.tasks": ("from queues import services", False),
        "governance.services": ("", True),
    }
    assert circles(import_graph(modules)) == []


SENDERS = {"task_enqueue", "task_send"}


def tasks_sent(source: str) -> list[str]:
    """The task names ``source`` sends with ``task_enqueue`` or ``task_send``."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if called in SENDERS:
                task = next((k.value for k in node.keywords if k.arg == "task"), None)
                assert isinstance(task, ast.Constant), "a task is sent by its name, a literal"
                names.append(str(task.value))
    return names


def test_every_task_sent_by_name_is_a_task_of_the_senders_app():
    sent = {
        (module, name)
        for module, (source, _package) in app_modules().items()
        for name in tasks_sent(source)
    }
    assert len(sent) >= 6  # the services of queues and reports that queue their tasks
    for module, name in sorted(sent):
        assert name.startswith(module.split(".")[0] + ".tasks."), (module, name)
        task = import_string(name)
        assert task.name == name, (module, name)


# --- 5. hooks and cross-app calls, as docs/architecture.md lists them -------------------------

DOC = Path(settings.BASE_DIR) / "docs" / "architecture.md"
HOOK_ROW = re.compile(r"^\| `(ARBITER_\w+)` \| `([\w.]+)` \| `([\w.]+)` \|", re.M)
CALL_ROW = re.compile(r"^\| `(\w+\.\w+)` \| `([\w.]+)` \| ((?:`\w+`(?:, )?)+) \|", re.M)
DOTTED = re.compile(rf"^({'|'.join(APPS)})\.[\w.]+$")


def settings_hooks() -> set[tuple[str, str]]:
    """(setting, dotted path) of every ``ARBITER_*`` setting that names a callable of an app."""
    found = set()
    for name in dir(settings):
        if not name.startswith("ARBITER_"):
            continue
        value = getattr(settings, name)
        for path in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
            if isinstance(path, str) and DOTTED.match(path):
                found.add((name, path))
    return found


def cross_app_calls(modules: dict[str, tuple[str, bool]]) -> dict[tuple[str, str], set[str]]:
    """(caller ``app.layer``, another app's services module as imported) → the names used."""
    calls: dict[tuple[str, str], set[str]] = {}
    for module, (source, _package) in modules.items():
        app = module.split(".")[0]
        caller = ".".join(module.split(".")[:2])
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            parts = node.module.split(".")
            if parts[0] == app or parts[0] not in APPS:
                continue
            if len(parts) > 1 and parts[1] == "services":
                names = {alias.name for alias in node.names}
                calls.setdefault((caller, node.module), set()).update(names)
            elif len(parts) == 1 and any(alias.name == "services" for alias in node.names):
                calls.setdefault((caller, f"{node.module}.services"), set()).add("*")
    return calls


def test_every_settings_hook_is_listed_and_goes_where_no_import_may():
    text = DOC.read_text()
    listed = {(setting, target): caller for setting, caller, target in HOOK_ROW.findall(text)}
    assert set(listed) == settings_hooks()
    modules = app_modules()
    for (setting, target), caller in listed.items():
        assert setting in modules[caller][0], f"{caller} does not read {setting}"
        target_app, caller_app = target.split(".")[0], caller.split(".")[0]
        # Where an import may not go (else: import it), and never into reports.
        assert target_app != caller_app and target_app not in MAY_IMPORT[caller_app], setting
        assert target_app != "reports", setting
        import_string(target)


def test_every_cross_app_call_is_listed():
    listed = {
        (caller, callee): {name.strip("` ") for name in names.split(",")}
        for caller, callee, names in CALL_ROW.findall(DOC.read_text())
    }
    assert cross_app_calls(app_modules()) == listed


def test_a_hidden_hook_or_call_is_found():
    assert cross_app_calls({"reports.services": ("from queues.services.x import y", False)}) == {
        ("reports.services", "queues.services.x"): {"y"}
    }
    assert not HOOK_ROW.findall("| `ARBITER_X` | governance.services | `queues.services.f` |")
