"""The labs that ``.ci/run`` builds in the background while the tests run (``deploy/ci/labs.sh``).

A fresh machine's slowest steps are the Go builds of the Kubernetes lab (and kubectl and Helm)
and the container images; they overlap the tests that need neither. So:

* ``labs_last`` orders the suite so that the files needing a background lab run last: first
  those of the container images (ready first, and the longest to run), then those of the
  Kubernetes lab, then the Helm chart's (kubectl and Helm, built last). A file goes whole (a
  test of it that needs no lab too); every test keeps its order relative to the others of its
  group, which is the order pytest-django gives (Django's: tests on the test database first,
  then transactional ones, then those without a database). So it runs after that sort.
* ``wait_for_labs`` (before each test's set-up) waits while the lab the test needs is still
  ``building`` (``deploy/ci/labs.sh`` writes one line per lab in ``var/ci-labs/``), printing
  how long it has waited; it fails the test with the build's reason when the lab ``failed``
  (skips outside CI), and does nothing when there is no such file: a developer's machine,
  where the tests find the labs as before.

tests/conftest.py registers this module as a plugin (its two hooks below).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

# In the order deploy/ci/labs.sh makes them: a test file runs after every file of an earlier lab.
LABS = ("containers", "k8s", "k8s-tools")
POLL_SECONDS = 5.0
PROGRESS_SECONDS = 60.0
# How long a test waits for one lab (ARBITER_CI_LABS_TIMEOUT): a fresh machine's whole build
# is about half of it.
TIMEOUT_SECONDS = 3600.0


def labs_of(item: pytest.Item) -> list[str]:
    """The background labs ``item`` needs (markers ``containers`` and ``k8s``, or a fixture of
    the lab's API server; the ``helm`` fixture: kubectl and Helm)."""
    fixtures = getattr(item, "fixturenames", ())
    needs = []
    if item.get_closest_marker("containers"):
        needs.append("containers")
    if item.get_closest_marker("k8s") or {"kube_server", "kube"} & set(fixtures):
        needs.append("k8s")
    if "helm" in fixtures:
        needs.append("k8s-tools")
    return needs


def labs_last(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with each file that needs a background lab moved to the end, whole: by the
    last lab it needs (``LABS``' order), the files of one lab in their collected order."""
    rank: dict[Path, int] = {}
    for item in items:
        needs = [LABS.index(lab) + 1 for lab in labs_of(item)]
        rank[item.path] = max([rank.get(item.path, 0), *needs])
    return sorted(items, key=lambda item: rank[item.path])  # stable: the rest keep their order


def status_dir() -> Path:
    """``ARBITER_CI_LABS_DIR`` (relative: to the repository), default ``var/ci-labs``."""
    root = Path(__file__).resolve().parent.parent
    return root / os.environ.get("ARBITER_CI_LABS_DIR", "var/ci-labs")


def lab_status(lab: str, directory: Path | None = None) -> str | None:
    """The lab's line (``building``, ``ready``, ``failed: …``), or None without a status file."""
    path = (directory or status_dir()) / lab
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return None


def builder_alive(directory: Path) -> bool:
    """Whether the ``deploy/ci/labs.sh`` that wrote ``directory`` still runs."""
    try:
        os.kill(int((directory / "pid").read_text().strip()), 0)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def wait_for_lab(
    lab: str,
    say: Callable[[str], None],
    *,
    directory: Path | None = None,
    timeout: float | None = None,
) -> str | None:
    """Wait while ``lab`` is ``building``. None when it is ready or has no status file, else
    why it is not there (failed, its builder gone, or still building after ``timeout``)."""
    directory = directory or status_dir()
    timeout = timeout or float(os.environ.get("ARBITER_CI_LABS_TIMEOUT", TIMEOUT_SECONDS))
    started = time.monotonic()
    said = started - PROGRESS_SECONDS  # say it at once, then each PROGRESS_SECONDS
    log = directory / f"{lab}.log"
    while True:
        status = lab_status(lab, directory)
        if status is None or status == "ready":
            return None
        if status.startswith("failed"):
            return f"the background build of the {lab} lab {status}"
        if not builder_alive(directory):
            return f"the {lab} lab says {status!r}, but deploy/ci/labs.sh has ended (log: {log})"
        waited = time.monotonic() - started
        if waited > timeout:
            return f"the {lab} lab was still {status!r} after {waited:.0f} s (log: {log})"
        if time.monotonic() - said >= PROGRESS_SECONDS:
            said = time.monotonic()
            minutes = f"{waited / 60:.0f} min"
            say(f"[ci-labs] waiting for the {lab} lab ({status}, {minutes}; log: {log})")
        time.sleep(POLL_SECONDS)


def wait_for_labs(item: pytest.Item) -> None:
    """Before ``item``'s set-up: wait for each background lab it needs (see the module)."""
    from tests.conftest import require_service

    config = item.config
    capture = config.pluginmanager.getplugin("capturemanager")
    reporter = config.pluginmanager.getplugin("terminalreporter")

    def say(line: str) -> None:
        if capture is None or reporter is None:
            print(line, flush=True)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    for lab in labs_of(item):
        why = wait_for_lab(lab, say)
        require_service(f"the {lab} lab", why is None, why or "")


@pytest.hookimpl(trylast=True)  # after pytest-django's sort, which would undo this one
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = labs_last(items)


@pytest.hookimpl(tryfirst=True)  # before the fixtures' set-up reads the lab's files
def pytest_runtest_setup(item: pytest.Item) -> None:
    wait_for_labs(item)
