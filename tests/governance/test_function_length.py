"""No function of the four apps runs past ``LIMIT`` lines unless it says why it is one piece.

A function's length is counted from its ``def`` line to its last line, docstring and comments
included (what a reader scrolls through). A longer function is split into named steps, or
carries a comment starting with ``# one piece:`` that says why it must stay whole (one
transaction under a lock, a table of cases read top to bottom, …). ``KNOWN`` lists the long
functions still waiting for either, each with where it stands; an entry that no longer needs
to be there fails the test, so that the list only shrinks. It is empty: every long function
was split (issue 26, item 4); keep it so.

The checker also runs on small made-up modules, so that a rule it stops enforcing fails.
"""

import ast
from pathlib import Path

import pytest
from django.conf import settings

APPS = ("governance", "queues", "approvals", "reports")
LIMIT = 80
MARKER = "# one piece:"
# (path, qualified name) → where it stands: long functions not yet split nor explained.
KNOWN: dict[tuple[str, str], str] = {}


def long_functions(source: str) -> list[tuple[str, int, bool]]:
    """(qualified name, length, whether it says why it is one piece) of every function of
    ``source`` longer than ``LIMIT`` lines."""
    lines = source.splitlines()
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                end = child.end_lineno or child.lineno
                length = end - child.lineno + 1
                if length > LIMIT:
                    body = lines[child.lineno - 1 : end]
                    found.append((name, length, any(MARKER in line for line in body)))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def app_sources() -> dict[str, list[Path]]:
    """Each app's Python files the checker reads (migrations left out)."""
    root = Path(settings.BASE_DIR)
    return {
        app: [path for path in sorted((root / app).rglob("*.py")) if "migrations" not in path.parts]
        for app in APPS
    }


def app_functions() -> dict[tuple[str, str], tuple[int, bool]]:
    root = Path(settings.BASE_DIR)
    functions = {}
    for paths in app_sources().values():
        for path in paths:
            for name, length, explained in long_functions(path.read_text()):
                functions[(path.relative_to(root).as_posix(), name)] = (length, explained)
    return functions


def test_the_checker_reads_every_apps_sources():
    """Without this, a wrong root would find no function at all and pass the tests below."""
    sources = app_sources()
    for app in APPS:
        names = {path.name for path in sources[app]}
        assert {"__init__.py", "apps.py"} <= names and len(names) > 5, app


def test_no_long_function_without_its_reason():
    unexplained = [
        f"{path}::{name} is {length} lines: split it, or say why with '{MARKER} …'"
        for (path, name), (length, explained) in sorted(app_functions().items())
        if not explained and (path, name) not in KNOWN
    ]
    assert unexplained == []


def test_the_known_long_functions_still_need_it():
    functions = app_functions()
    settled = [key for key in KNOWN if key not in functions or functions[key][1]]
    assert settled == [], "split or explained now: remove from KNOWN"


def _function(lines: int, *, comment: str = "") -> str:
    body = [f"    {comment}"] if comment else []
    body += [f"    x{n} = {n}" for n in range(lines - 1 - len(body))]
    return "\n".join(["def step():", *body]) + "\n"


@pytest.mark.parametrize(
    "source, expected",
    [
        (_function(LIMIT), []),
        (_function(LIMIT + 1), [("step", LIMIT + 1, False)]),
        (_function(LIMIT + 1, comment=f"{MARKER} one transaction"), [("step", LIMIT + 1, True)]),
        (
            "class Backend:\n" + "".join(f"    {line}\n" for line in _function(90).splitlines()),
            [("Backend.step", 90, False)],
        ),
        (
            "def outer():\n"
            + "".join(f"    {line}\n" for line in _function(85).splitlines())
            + "    return step\n",
            [("outer", 87, False), ("outer.step", 85, False)],
        ),
    ],
    ids=["at-the-limit", "over", "explained", "method", "nested"],
)
def test_the_checker_counts_and_reads_the_reason(source, expected):
    assert long_functions(source) == expected
