"""The background labs of .ci/run (tests/ci_labs.py, deploy/ci/labs.sh): the files needing a
lab run last, whole and in their order, and a test waits while its lab builds, fails with the
build's reason, and finds no status file on a developer's machine (it then goes on as before).
"""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests import ci_labs


class Item:
    """What ``labs_last`` reads of a pytest item."""

    def __init__(self, path: str, name: str, *markers: str, fixtures: tuple[str, ...] = ()):
        self.path = Path(path)
        self.name = name
        self.markers = markers
        self.fixturenames = fixtures

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None

    def __repr__(self) -> str:
        return f"{self.path.name}::{self.name}"


def test_files_needing_a_lab_run_last_whole_in_their_order_and_by_lab():
    items = [
        Item("a.py", "1"),
        Item("helm.py", "render", "k8s", fixtures=("helm",)),
        Item("kueue.py", "1", "k8s"),
        Item("b.py", "1"),
        Item("stack.py", "1", "containers"),
        Item("mixed.py", "slurm"),  # needs no lab, but its file does: it goes with it
        Item("mixed.py", "kueue", "k8s"),
        Item("kueue.py", "2", "k8s"),
        Item("c.py", "1"),
        Item("unmarked.py", "1", fixtures=("kube",)),  # the lab's fixture, no marker
        Item("helm.py", "install", "k8s", fixtures=("helm",)),
    ]
    ordered = ci_labs.labs_last(items)  # type: ignore[arg-type]
    assert [repr(i) for i in ordered] == [
        "a.py::1",
        "b.py::1",
        "c.py::1",
        "stack.py::1",
        "kueue.py::1",
        "mixed.py::slurm",
        "mixed.py::kueue",
        "kueue.py::2",
        "unmarked.py::1",
        "helm.py::render",
        "helm.py::install",
    ]


def _builder(directory: Path) -> subprocess.Popen:
    """A stand-in for deploy/ci/labs.sh: a live process whose pid is in ``directory/pid``."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    (directory / "pid").write_text(f"{process.pid}\n")
    return process


def test_a_test_waits_while_its_lab_builds_and_goes_on_when_it_is_ready(tmp_path, monkeypatch):
    monkeypatch.setattr(ci_labs, "POLL_SECONDS", 0.05)
    builder = _builder(tmp_path)
    (tmp_path / "k8s").write_text("building\n")
    said: list[str] = []
    threading.Timer(0.5, lambda: (tmp_path / "k8s").write_text("ready\n")).start()
    started = time.monotonic()
    try:
        why = ci_labs.wait_for_lab("k8s", said.append, directory=tmp_path, timeout=30)
    finally:
        builder.kill()
        builder.wait()
    assert why is None
    assert time.monotonic() - started >= 0.4
    assert said and said[0].startswith("[ci-labs] waiting for the k8s lab (building, 0 min; log:")


def test_a_failed_lab_gives_the_builds_reason(tmp_path):
    (tmp_path / "containers").write_text("failed: `stack.sh build` exited 1 (log: x)\n")
    why = ci_labs.wait_for_lab("containers", print, directory=tmp_path, timeout=30)
    assert (
        why
        == "the background build of the containers lab failed: `stack.sh build` exited 1 (log: x)"
    )


def test_a_lab_left_building_by_a_dead_run_or_building_too_long_is_not_waited_for(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(ci_labs, "POLL_SECONDS", 0.05)
    (tmp_path / "k8s").write_text("building\n")
    (tmp_path / "pid").write_text("999999999\n")  # no such process
    why = ci_labs.wait_for_lab("k8s", print, directory=tmp_path, timeout=30)
    assert why is not None and "deploy/ci/labs.sh has ended" in why
    builder = _builder(tmp_path)
    try:
        why = ci_labs.wait_for_lab("k8s", print, directory=tmp_path, timeout=0.2)
    finally:
        builder.kill()
        builder.wait()
    assert why is not None and "was still 'building' after" in why


def test_without_a_status_file_a_test_goes_on_as_before(tmp_path):
    assert ci_labs.wait_for_lab("k8s", print, directory=tmp_path, timeout=30) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="labs.sh runs as root (it may install packages)")
def test_labs_sh_writes_building_then_a_status_per_lab(tmp_path):
    """deploy/ci/labs.sh with every step a stand-in (PATH: a ``nice`` that fails for the Go
    build and succeeds for the images; ``bash deploy/k8s/up.sh`` is then never reached)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_nice = bin_dir / "nice"
    fake_nice.write_text(
        '#!/bin/sh\ncase "$*" in *k8s/build.sh*) echo "go: no network" >&2; exit 3;; esac\n'
        "echo images built\n"
    )
    fake_nice.chmod(0o755)
    status = tmp_path / "status"
    done = subprocess.run(
        ["bash", str(Path(settings.BASE_DIR) / "deploy" / "ci" / "labs.sh")],
        env={
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "ARBITER_CI_LABS_DIR": str(status),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert (status / "containers").read_text() == "ready\n"
    for lab in ("k8s", "k8s-tools"):
        line = (status / lab).read_text()
        assert line.startswith("failed: `nice -n 19 bash deploy/k8s/build.sh "), line
        assert "exited 3" in line and line.rstrip().endswith("go: no network")
    assert "images built" in (status / "containers.log").read_text()
