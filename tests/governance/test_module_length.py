"""No module of the four apps runs past ``LIMIT`` lines unless ``KNOWN`` says why.

The house rule (``DEVELOPERS.md``, ``docs/architecture.md``): a module past about 500 lines
becomes a package named after what it holds, one module per part. A module's length is its
number of lines, docstrings, comments and blank lines included (what a reader scrolls
through); migrations are left out (generated), and so are the tests and benchmarks (not the
apps). ``KNOWN`` lists the longer modules with the reason each stands: one that must stay
whole says why, one still waiting for its split says where it stands. An entry that is no
longer over the limit (or no longer exists) fails the test, so that the list only shrinks.

The checker also runs on made-up modules, so that a rule it stops enforcing fails.
"""

from pathlib import Path

import pytest
from django.conf import settings

from tests.governance.test_function_length import APPS, app_sources

LIMIT = 500
WAITING = "waiting for its split into a package (issue 40 split the three largest first)"
# path → why it is longer than LIMIT.
KNOWN: dict[str, str] = {
    "governance/settings.py": (
        "one piece: Django reads its settings as one module (DJANGO_SETTINGS_MODULE), each "
        "setting beside the comment that says what it is for"
    ),
    "queues/services/kueue/backend.py": WAITING,
}


def too_long(sources: dict[str, str]) -> dict[str, int]:
    """The modules of ``sources`` (path → source) longer than ``LIMIT`` lines, with their length."""
    lengths = {path: len(source.splitlines()) for path, source in sources.items()}
    return {path: length for path, length in sorted(lengths.items()) if length > LIMIT}


def app_module_sources() -> dict[str, str]:
    root = Path(settings.BASE_DIR)
    return {
        path.relative_to(root).as_posix(): path.read_text()
        for paths in app_sources().values()
        for path in paths
    }


def test_the_checker_reads_every_apps_modules():
    """Without this, a wrong root would find no module at all and pass the tests below."""
    sources = app_module_sources()
    for app in APPS:
        assert sum(path.startswith(f"{app}/") for path in sources) > 5, app
    assert not any("migrations" in path or path.startswith("tests/") for path in sources)


def test_no_long_module_without_its_reason():
    unexplained = [
        f"{path} is {length} lines: make it a package named after what it holds, or say why "
        "in KNOWN"
        for path, length in too_long(app_module_sources()).items()
        if path not in KNOWN
    ]
    assert unexplained == []


def test_the_known_long_modules_still_need_it():
    long = too_long(app_module_sources())
    settled = [path for path in KNOWN if path not in long]
    assert settled == [], "under the limit now (or gone): remove from KNOWN"


def test_every_known_module_has_a_reason():
    assert all(reason.strip() for reason in KNOWN.values())


@pytest.mark.parametrize(
    "lines, expected",
    [(LIMIT, {}), (LIMIT + 1, {"a/b.py": LIMIT + 1})],
    ids=["at-the-limit", "over"],
)
def test_the_checker_counts_lines(lines, expected):
    assert too_long({"a/b.py": "x = 1\n" * lines}) == expected
