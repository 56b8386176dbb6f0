"""A worker killed in the middle of a task loses nothing: the task runs again and finishes.

Real Redis broker, real worker processes, the real review build (``reports.tasks``), paused
half-way by ``tests.worker_pause`` (the review is then committed as "building") and killed
there with SIGKILL, as when a machine is lost:

- the pool process dies: the worker rejects the message (``task_reject_on_worker_lost``) and
  the broker hands it out again at once;
- the whole worker dies: the message, never acknowledged (``task_acks_late``), goes back to
  the queue once Redis's visibility timeout has passed, and another worker runs it.
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from django.conf import settings

from governance.celery import app
from reports import services, tasks
from reports.models import MonthlyReview, ReviewStatus
from tests.conftest import require_service
from tests.governance.test_worker import _test_database_url
from tests.reports.test_review_immutability import _job

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

START = datetime(2026, 10, 1, tzinfo=UTC)
END = datetime(2026, 11, 1, tzinfo=UTC)
WAIT_SECONDS = 90


@pytest.fixture
def broker() -> redis.Redis:
    url = app.conf.broker_url or ""
    is_redis = url.startswith(("redis://", "rediss://"))
    require_service("A Redis broker (CELERY_BROKER_URL=redis://...)", is_redis, url)
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.RedisError as error:
        require_service("Redis", False, str(error))
    return client


class Workers:
    """Worker processes of one test, each in a session of its own (killed as a group)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.queue = f"test-lost-{uuid.uuid4().hex[:12]}"
        self.pause_key = f"{self.queue}:attempts"
        self.processes: list[tuple[subprocess.Popen, Path]] = []

    def start(self, *args: str, **env: str) -> subprocess.Popen:
        log_path = self.tmp_path / f"worker-{len(self.processes)}.log"
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "governance", "worker", "--loglevel=info",
             "--without-mingle", "--without-gossip", "--without-heartbeat",
             "--include", "tests.worker_pause", "--queues", self.queue,
             "--hostname", f"{self.queue}-{len(self.processes)}@%h", *args],
            cwd=settings.BASE_DIR,
            env={
                **os.environ,
                "DATABASE_URL": _test_database_url(),
                "CELERY_TASK_ALWAYS_EAGER": "",
                "ARBITER_TEST_PAUSE_KEY": self.pause_key,
                **env,
            },
            stdout=log_path.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        self.processes.append((process, log_path))
        return process

    def logs(self) -> str:
        return "\n".join(f"--- {path.name}:\n{path.read_text()}" for _p, path in self.processes)

    def stop(self) -> None:
        for process, _path in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


@pytest.fixture
def workers(tmp_path, broker):
    started = Workers(tmp_path)
    yield started
    started.stop()
    broker.delete(started.pause_key, started.queue)


def _wait(what: str, done: Callable[[], bool], workers: Workers) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"Not within {WAIT_SECONDS} s: {what}\n{workers.logs()}")
        time.sleep(0.2)


def _review_half_built(world, ops, monkeypatch, broker, workers) -> tuple[MonthlyReview, int]:
    """Queue a review build to the test's workers; wait until its first attempt is paused
    half-way (the review committed as "building"). Returns the review and that attempt's pid."""
    from queues.services.workload.ingest import events_ingest

    events_ingest(events=_job(world, "1", START + timedelta(days=2), timedelta(minutes=10)))
    monkeypatch.setattr(services, "_queue_build", lambda review_id: None)
    review = services.review_request(user=ops, start=START, end=END)
    tasks.review_build.apply_async(args=[review.pk], queue=workers.queue)
    _wait("the first attempt starts", lambda: broker.llen(workers.pause_key) == 1, workers)
    review.refresh_from_db()
    assert review.status == ReviewStatus.BUILDING
    return review, int(broker.lindex(workers.pause_key, 0) or 0)


def _built_once(review: MonthlyReview, broker: redis.Redis, workers: Workers) -> None:
    def built() -> bool:
        review.refresh_from_db()
        return review.status == ReviewStatus.DONE

    _wait("the review is built by the task run again", built, workers)
    attempts = [int(pid) for pid in broker.lrange(workers.pause_key, 0, -1)]
    assert len(attempts) == 2 and attempts[0] != attempts[1], attempts
    assert review.metrics["waits"]["overall"]["jobs"] == 1
    assert MonthlyReview.objects.count() == 1
    # Acknowledged now: nothing left in the queue, nothing waiting for redelivery.
    assert broker.llen(workers.queue) == 0
    assert not [m for m in broker.hvals("unacked") if workers.queue.encode() in m]


def test_a_killed_pool_process_leaves_the_task_to_run_again(world, ops, monkeypatch, broker,
                                                             workers):  # fmt: skip
    workers.start("--pool=prefork", "--concurrency=1")
    review, pid = _review_half_built(world, ops, monkeypatch, broker, workers)

    os.kill(pid, signal.SIGKILL)

    _built_once(review, broker, workers)
    assert "WorkerLostError" in workers.logs()


def test_a_lost_worker_leaves_the_task_to_another_worker(world, ops, monkeypatch, broker,
                                                         workers):  # fmt: skip
    # A visibility timeout of seconds, so that the test does not wait the production hour.
    short = {"ARBITER_BROKER_VISIBILITY_TIMEOUT": "4", "ARBITER_TASK_TIME_LIMIT": "3"}
    first = workers.start("--pool=solo", **short)
    review, pid = _review_half_built(world, ops, monkeypatch, broker, workers)
    assert pid == first.pid

    os.killpg(first.pid, signal.SIGKILL)  # the worker and everything it started
    first.wait()
    review.refresh_from_db()
    assert review.status == ReviewStatus.BUILDING  # killed half-way, nothing acknowledged

    # Another worker starting once the message has been out longer than the visibility
    # timeout puts it back in the queue (a running worker sweeps every 100 s or so).
    time.sleep(int(short["ARBITER_BROKER_VISIBILITY_TIMEOUT"]) + 1)
    workers.start("--pool=solo", **short)
    _built_once(review, broker, workers)
