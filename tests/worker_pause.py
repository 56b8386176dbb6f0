"""Loaded into a test's Celery worker (``--include tests.worker_pause``): pauses the first
attempt of a review build in the middle, so that the test can kill the worker there.

The review build's first step after marking the review "building" (committed) is the
workload rollup; the first attempt records its process id in a Redis list and waits there
until the test kills it. Later attempts (the task run again) record theirs and go on. The
list's key is ``ARBITER_TEST_PAUSE_KEY``; without it nothing is paused.
"""

import os
import time
from typing import Any

import redis
from django.conf import settings

from reports import services

PAUSE_KEY = os.environ.get("ARBITER_TEST_PAUSE_KEY", "")
PAUSE_LIMIT_SECONDS = 120
_roll_up = services.workload_hours_roll_up


def _paused_roll_up(*args: Any, **kwargs: Any) -> Any:
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    attempt = client.rpush(PAUSE_KEY, os.getpid())
    if attempt == 1:
        deadline = time.monotonic() + PAUSE_LIMIT_SECONDS
        while time.monotonic() < deadline:  # killed here by the test
            time.sleep(0.1)
        raise RuntimeError("The test did not kill this worker in time.")
    return _roll_up(*args, **kwargs)


if PAUSE_KEY:
    services.workload_hours_roll_up = _paused_roll_up  # type: ignore[assignment]
