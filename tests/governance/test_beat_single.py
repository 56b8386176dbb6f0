"""Two Celery beat processes never send a schedule entry twice (governance.celery's
SingleBeatScheduler): one holds the lock in Redis and sends, the other stands by; when the
holder is killed, the other takes over from where it stopped.

Real Redis, real ``celery beat`` processes (Arbiter's app and scheduler, with a quick schedule
of its own: tests/beat_app.py). What they sent is read from the queue in Redis and from their
logs.
"""

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
import redis
from django.conf import settings

from tests.beat_app import ENTRIES
from tests.governance.test_worker_lost import broker  # noqa: F401 (fixture)

pytestmark = pytest.mark.worker

SENT = re.compile(
    r"^\[(?P<at>[\d-]+ [\d:,]+): INFO/MainProcess\] Scheduler: Sending due task (?P<entry>\S+)",
    re.MULTILINE,
)
RUN_SECONDS = 12


def _start_beat(tmp_path: Path, queue: str, name: str) -> tuple[subprocess.Popen, Path]:
    log_path = tmp_path / f"{name}.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tests.beat_app", "beat", "--loglevel=info",
         f"--schedule={tmp_path / name}-schedule", f"--pidfile={tmp_path / name}.pid"],
        cwd=settings.BASE_DIR,
        env={**os.environ, "ARBITER_TEST_BEAT_QUEUE": queue},
        stdout=log_path.open("w"),
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    return process, log_path


def _sends(log_path: Path) -> list[tuple[datetime, str]]:
    return [
        (datetime.strptime(m["at"], "%Y-%m-%d %H:%M:%S,%f"), m["entry"])
        for m in SENT.finditer(log_path.read_text())
    ]


def _queued(client: redis.Redis, queue: str) -> Counter[str]:
    return Counter(json.loads(raw)["headers"]["task"] for raw in client.lrange(queue, 0, -1))


def test_two_beats_send_each_entry_once_and_the_second_takes_over(broker, tmp_path):  # noqa: F811
    queue = f"test-beat-{uuid.uuid4().hex[:12]}"
    beats = [_start_beat(tmp_path, queue, "beat-a")]
    time.sleep(1)
    beats.append(_start_beat(tmp_path, queue, "beat-b"))
    try:
        time.sleep(RUN_SECONDS)
        (a, a_log), (b, b_log) = beats
        logs = "\n".join(f"--- {path.name}:\n{path.read_text()}" for _p, path in beats)
        assert a.poll() is None and b.poll() is None, logs
        sent_a, sent_b = _sends(a_log), _sends(b_log)
        # One sends, the other stands by.
        holder, standby = (a, b) if sent_a else (b, a)
        assert bool(sent_a) != bool(sent_b), logs
        before = Counter(entry for _at, entry in sent_a + sent_b)
        for entry, seconds in ENTRIES.items():
            assert RUN_SECONDS / seconds - 2 <= before[entry] <= RUN_SECONDS / seconds + 1, logs

        # The holder is lost without a word; its lock expires and the other beat goes on.
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        time.sleep(RUN_SECONDS)
        assert standby.poll() is None, logs

        all_sends = _sends(a_log) + _sends(b_log)
        logs = "\n".join(f"--- {path.name}:\n{path.read_text()}" for _p, path in beats)
        assert len(_sends(b_log if holder is a else a_log)) >= 2, logs
        # Every send reached the queue once; no entry was sent twice for one tick (two sends of
        # an entry are at least most of its interval apart, across the take-over too).
        assert sum(_queued(broker, queue).values()) == len(all_sends), logs
        for entry, seconds in ENTRIES.items():
            times = sorted(at for at, name in all_sends if name == entry)
            gaps = [
                (later - earlier).total_seconds() for earlier, later in itertools.pairwise(times)
            ]
            assert gaps and min(gaps) >= seconds * 0.75, (entry, gaps, logs)
    finally:
        for process, _path in beats:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=30)
        broker.delete(queue, f"{queue}:beat-lock", f"{queue}:beat-lock:last-run")
