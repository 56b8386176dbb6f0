"""The Celery app of the two-beat test (tests/governance/test_beat_single.py): Arbiter's own,
with Arbiter's beat scheduler, but a schedule of two quick entries sent to the test's queue and
a lock of the test's own with a short life."""

import os

from governance.celery import app

QUEUE = os.environ.get("ARBITER_TEST_BEAT_QUEUE", "test-beat")
ENTRIES = {"every-2s": 2.0, "every-3s": 3.0}

app.conf.beat_schedule = {
    name: {
        "task": "governance.tasks.grants_transition",
        "schedule": seconds,
        "options": {"queue": QUEUE},
    }
    for name, seconds in ENTRIES.items()
}
app.conf.beat_lock_key = f"{QUEUE}:beat-lock"
app.conf.beat_lock_seconds = 5
app.conf.beat_max_interval = 1
