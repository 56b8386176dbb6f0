"""The image of deploy/Dockerfile, run with podman: non-root, no secret, a web container
ready against PostgreSQL and Redis, a worker container running a task sent from here.

Marked ``containers``; runs when ``ARBITER_CONTAINER_IMAGE`` names a built image (``.ci/run``
builds it on deploy/containers/base-image.sh's local Debian base: deploy/containers/stack.sh
build); skips without it, and fails in CI. The containers use the host's network, and the
test's own databases. The whole compose stack runs in test_container_stack.py.
"""

import os
import shutil
import socket
import subprocess
import time
import urllib.request
import uuid

import pytest
from celery.exceptions import TimeoutError as CeleryTimeoutError

from governance.celery import app
from governance.tasks import grants_transition
from tests.conftest import require_service
from tests.governance.test_worker import _test_database_url

pytestmark = [pytest.mark.containers, pytest.mark.django_db(transaction=True)]

IMAGE = os.environ.get("ARBITER_CONTAINER_IMAGE", "")


@pytest.fixture
def image() -> str:
    require_service(
        "the container image",
        bool(IMAGE) and shutil.which("podman") is not None,
        "set ARBITER_CONTAINER_IMAGE to an image built from deploy/Dockerfile",
    )
    if not (app.conf.broker_url or "").startswith("redis://"):
        pytest.skip("the containers need a Redis broker (CELERY_BROKER_URL=redis://...)")
    if not _test_database_url().startswith("postgres"):
        pytest.skip("the containers need PostgreSQL (DATABASE_URL=postgres://...)")
    return IMAGE


def _podman(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _env() -> list[str]:
    values = {
        "DATABASE_URL": _test_database_url(),
        "CELERY_BROKER_URL": app.conf.broker_url,
        "DJANGO_SECRET_KEY": "test-only-" + uuid.uuid4().hex * 2,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SECURE_SSL_REDIRECT": "0",
    }
    return [item for name, value in values.items() for item in ("-e", f"{name}={value}")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_image_runs_as_a_user_and_holds_no_secret(image):
    who = _podman("run", "--rm", "--network", "host", image, "id", "-u")
    assert who.returncode == 0, who.stderr
    assert who.stdout.strip() != "0"
    found = _podman(
        "run", "--rm", "--network", "host", image, "sh", "-c",
        "ls -a /app/.env /app/deploy/slurm-client/munge.key /app/.git 2>/dev/null; true",
    )  # fmt: skip
    assert found.stdout.strip() == ""


def test_web_and_worker_containers_serve_and_run_a_task(image):
    port = _free_port()
    queue = f"test-container-{uuid.uuid4().hex[:12]}"
    names = [f"arbiter-web-{queue}", f"arbiter-worker-{queue}"]
    web = ["--rm", "-d", "--network", "host", "--name", names[0], *_env(), "-e", f"PORT={port}"]
    worker = ["--rm", "-d", "--network", "host", "--name", names[1], *_env()]
    try:
        started = _podman("run", *web, image)
        assert started.returncode == 0, started.stderr
        started = _podman(
            "run", *worker, image, "celery", "-A", "governance", "worker", "--pool=solo",
            "-l", "info", "--queues", queue, "--without-mingle", "--without-gossip",
        )  # fmt: skip
        assert started.returncode == 0, started.stderr

        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
                    assert r.status == 200
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(_podman("logs", names[0]).stderr)
                time.sleep(1)

        result = grants_transition.apply_async(queue=queue)
        try:
            assert result.get(timeout=120) == []
        except CeleryTimeoutError:
            pytest.fail(_podman("logs", names[1]).stderr)
        logs = _podman("logs", names[1])
        assert "governance.tasks.grants_transition" in logs.stdout + logs.stderr
    finally:
        for name in names:
            _podman("rm", "-f", name)
