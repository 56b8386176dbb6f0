"""A task sent through the configured broker is run by a real Celery worker process.

Locally the broker is the embedded one kept in files; in CI it is Redis. The worker uses the
test database, so what it writes is visible here once it has committed.
"""

import os
import shlex
import subprocess
import sys
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
from celery.exceptions import TimeoutError as CeleryTimeoutError
from django.conf import settings
from kombu import Connection

from governance import services
from governance.celery import app
from governance.models import ReminderKind, ReviewReminder
from governance.tasks import review_reminders_send
from tests.conftest import require_service

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

RESULT_TIMEOUT_SECONDS = 60
WORKER_ARGS = shlex.split(
    "-m celery -A governance worker --pool=solo --loglevel=info "
    "--without-mingle --without-gossip --without-heartbeat"
)


def _test_database_url() -> str:
    """The URL of the database this test runs on (pytest-django's test database)."""
    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    scheme = {"django.db.backends.postgresql": "postgres", "django.db.backends.mysql": "mysql"}
    credentials = quote(db["USER"], safe="")
    if db.get("PASSWORD"):
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = db.get("HOST") or "localhost"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"{scheme[db['ENGINE']]}://{credentials}@{host}{port}/{quote(db['NAME'], safe='')}"


def _broker_reachable() -> tuple[bool, str]:
    try:
        with Connection(
            app.conf.broker_url, transport_options=app.conf.broker_transport_options
        ) as c:
            c.ensure_connection(max_retries=1, timeout=5)
    except Exception as error:  # any failure to connect means the same thing here
        return False, f"{app.conf.broker_url}: {error}"
    return True, ""


@dataclass
class Worker:
    queue: str
    process: subprocess.Popen
    log_path: Path

    def describe(self) -> str:
        return f"worker exit code {self.process.poll()}; its log:\n{self.log_path.read_text()}"


@pytest.fixture
def worker(request, tmp_path) -> Worker:
    """Start a worker on a queue of its own; stop it when the test ends.

    A queue of its own keeps other workers on the same broker (a ``make run`` in another
    terminal, another test run) from taking the task and running it on another database.
    """
    assert not app.conf.task_always_eager, "CELERY_TASK_ALWAYS_EAGER would bypass the broker"
    reachable, why = _broker_reachable()
    require_service("The Celery broker", reachable, why)

    queue = f"test-worker-{uuid.uuid4().hex[:12]}"
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "DJANGO_EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
        "CELERY_TASK_ALWAYS_EAGER": "",
    }
    log_path = tmp_path / "worker.log"
    log = log_path.open("w")
    process = subprocess.Popen(
        [sys.executable, *WORKER_ARGS, "--queues", queue, "--hostname", f"{queue}@%h"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def stop() -> None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()

    request.addfinalizer(stop)
    return Worker(queue=queue, process=process, log_path=log_path)


def test_worker_runs_review_reminders_through_the_broker(worker, world, today):
    services.tier_update(
        tier=world.key,
        user=world.ops,
        reason="Test set-up",
        data={"last_reviewed_on": today - timedelta(days=world.key.review_cycle_days - 3)},
    )

    result = review_reminders_send.apply_async(queue=worker.queue)
    try:
        sent = result.get(timeout=RESULT_TIMEOUT_SECONDS)
    except CeleryTimeoutError:
        pytest.fail(f"No result within {RESULT_TIMEOUT_SECONDS} s ({worker.describe()})")

    assert sent == 1, worker.describe()
    reminder = ReviewReminder.objects.get()
    assert reminder.tier == world.key
    assert reminder.kind == ReminderKind.DUE_SOON
    assert reminder.due_on == today + timedelta(days=3)
    assert reminder.recipient == world.ops.email
