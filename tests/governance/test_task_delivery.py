"""How tasks are delivered: every task of the four apps is acknowledged late and given back
when its worker is lost, within a time limit shorter than the broker's visibility timeout.

The registry is read from the Celery app, so a new task (or one that turns ``acks_late`` off)
fails here. Each task is idempotent (its docstring says why it is safe to run twice). The
behaviour itself, with real workers killed mid-task, is in test_worker_lost.py; two beat
processes in test_beat_single.py.
"""

from django.conf import settings

from governance.celery import app
from tests.governance.test_settings import _run

APPS = ("governance.", "queues.", "approvals.", "reports.")


def test_every_task_is_acknowledged_late_and_given_back_when_its_worker_is_lost():
    app.loader.import_default_modules()
    ours = {name: task for name, task in app.tasks.items() if name.startswith(APPS)}
    assert len(ours) >= 18, sorted(ours)
    for name, task in ours.items():
        assert task.acks_late, f"{name}: not acknowledged late (must be idempotent and late)"
        assert task.reject_on_worker_lost, f"{name}: dropped when its worker is lost"


def test_the_visibility_timeout_is_longer_than_any_task():
    time_limit = app.conf.task_time_limit
    assert time_limit and time_limit > 0
    assert time_limit < settings.ARBITER_BROKER_VISIBILITY_TIMEOUT
    # A countdown longer than the visibility timeout would be delivered twice: the longest is
    # a sync's retry (10 minutes).
    from queues.services import retry_delay

    assert max(retry_delay(n) for n in range(50)) < settings.ARBITER_BROKER_VISIBILITY_TIMEOUT


def test_a_redis_broker_gets_the_visibility_timeout(tmp_path):
    code = (
        "import django; django.setup(); from governance.celery import app; "
        "print(app.conf.broker_transport_options['visibility_timeout'])"
    )
    env = {
        "DJANGO_SETTINGS_MODULE": "governance.settings",
        "DJANGO_DEBUG": "1",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
        "ARBITER_TASK_TIME_LIMIT": "1800",
    }
    result = _run(["-c", code], env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "3600"


def test_a_visibility_timeout_not_longer_than_the_time_limit_refuses_to_start(tmp_path):
    env = {
        "DJANGO_SETTINGS_MODULE": "governance.settings",
        "DJANGO_DEBUG": "1",
        "ARBITER_TASK_TIME_LIMIT": "3600",
        "ARBITER_BROKER_VISIBILITY_TIMEOUT": "3600",
    }
    result = _run(["-c", "import django; django.setup()"], env, tmp_path)
    assert result.returncode != 0
    assert "ARBITER_BROKER_VISIBILITY_TIMEOUT (3600 s) must be longer than" in result.stderr
