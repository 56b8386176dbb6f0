"""``/healthz`` and ``/readyz``: what an orchestrator's probes see (governance.toolkit.health)."""

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client

PRODUCTION_LIKE = {
    "SECURE_SSL_REDIRECT": True,
    "ALLOWED_HOSTS": ["arbiter.example.com"],
}


def _probe(path: str, method: str = "get") -> tuple[int, dict]:
    # The kubelet probes a pod by its address, over plain HTTP, with no session.
    response = getattr(Client(), method)(path, HTTP_HOST="10.1.2.3:8000")
    return response.status_code, json.loads(response.content)


def test_healthz_answers_alive_over_plain_http_to_any_host(settings):
    for name, value in PRODUCTION_LIKE.items():
        setattr(settings, name, value)
    assert _probe("/healthz") == (200, {"status": "alive"})
    assert _probe("/healthz/")[0] == 200
    # The probes skip the host check and the redirect; every other page still has them.
    assert Client().get("/projects/", HTTP_HOST="10.1.2.3:8000").status_code == 400


@pytest.mark.django_db
def test_readyz_is_ready_with_database_broker_and_every_migration(settings):
    for name, value in PRODUCTION_LIKE.items():
        setattr(settings, name, value)
    status, body = _probe("/readyz")
    assert (status, body) == (
        200,
        {"status": "ready", "checks": {"database": "ok", "broker": "ok", "migrations": "ok"}},
    ), body


@pytest.mark.django_db
def test_readyz_is_not_ready_while_a_migration_is_not_applied():
    recorder = MigrationRecorder.Migration.objects
    last = recorder.filter(app="reports").order_by("-id").first()
    assert last is not None
    last.delete()  # as if the code were newer than the database (rolled back with the test)

    status, body = _probe("/readyz")

    assert status == 503
    assert body["status"] == "not ready"
    assert body["checks"]["database"] == "ok"
    assert f"reports.{last.name}" in body["checks"]["migrations"]
    assert "1 migration(s) not applied" in body["checks"]["migrations"]


def test_readyz_names_the_database_and_the_broker_when_they_do_not_answer(tmp_path):
    """A process configured for servers that do not answer: 503, each check naming its error,
    and no exception escapes (the probe never turns into a 500)."""
    code = (
        "import json, django; django.setup()\n"
        "from django.test import Client\n"
        "r = Client().get('/readyz', HTTP_HOST='10.1.2.3')\n"
        "print(json.dumps({'status': r.status_code, 'body': json.loads(r.content)}))\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "governance.settings",
        "ARBITER_ENV_FILE": "",
        "DJANGO_DEBUG": "1",
        "ARBITER_DATA_DIR": str(tmp_path),
        # Port 1 on the loopback: nothing listens there.
        "DATABASE_URL": "postgres://postgres@127.0.0.1:1/arbiter",
        "CELERY_BROKER_URL": "redis://127.0.0.1:1/0",
    }
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["status"] == 503
    checks = outcome["body"]["checks"]
    assert outcome["body"]["status"] == "not ready"
    assert checks["database"].startswith("OperationalError"), checks
    assert checks["broker"] != "ok", checks
    assert "migrations" in checks


def test_probes_answer_only_get_and_head():
    response = Client().post("/readyz", HTTP_HOST="10.1.2.3")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
    assert Client().head("/healthz", HTTP_HOST="10.1.2.3").status_code == 200
