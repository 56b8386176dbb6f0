"""An upgrade from the last release, and a backup restored, on PostgreSQL.

The last landed release (``RELEASE``) is checked out from git and run as a site would have
run it: migrate, the demo's data (rules with their history and rule changes, the workload
evidence, requests and their approvals, built monthly reviews), and one more rule change
approved by ``ops2`` and applied. This code then migrates the same database (the upgrade,
timed), and every row of every model is still there. A rollback of the change made before
the upgrade is proposed, approved and applied with this code.

Then the backup and restore drill of the README: ``deploy/backup.sh`` (pg_dump) of the
upgraded database, ``deploy/restore.sh`` (pg_restore, migrate) into a new one: the same rows,
the change's history, and its rollback works there too.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from tests.conftest import require_service

pytestmark = pytest.mark.postgres

# The last landed release (no tags yet: its commit on main).
RELEASE = "09a7d30"
DEMO_LOAD = ["seed_demo", "seed_demo_workload", "seed_demo_approvals", "seed_demo_reviews"]

COUNT_ROWS = """
import json, django
django.setup()
from django.apps import apps
print(json.dumps({m._meta.label: m._default_manager.count() for m in apps.get_models()}))
"""

CHANGE_BEFORE_UPGRADE = """
import json, django
django.setup()
from django.db.models import F
from governance import services
from governance.models import Quota, User
from governance.services import EditSpec
ops, ops2 = User.objects.get(username="ops"), User.objects.get(username="ops2")
quota = Quota.objects.filter(guarantee__gt=F("lending_limit") + 1).order_by("pk").first()
before = quota.guarantee
change = services.rule_change_create(
    user=ops, reason="Before the upgrade",
    edits=[EditSpec(target=quota, field="guarantee", value=before - 1)],
)
services.rule_change_approve(change=change, user=ops2)
services.rule_change_apply(change=change, user=ops)
quota.refresh_from_db()
print(json.dumps({"change": change.pk, "quota": quota.pk, "before": before,
                  "after": quota.guarantee}))
"""

ROLLBACK = """
import json, sys, django
django.setup()
from governance import services
from governance.models import ChangeStatus, Quota, RuleChange, User
made = json.loads(sys.argv[1])
ops, ops2 = User.objects.get(username="ops"), User.objects.get(username="ops2")
change = RuleChange.objects.get(pk=made["change"])
quota = Quota.objects.get(pk=made["quota"])
history = [row.rule_change_id for row in quota.history.order_by("history_id")]
rollback = services.rule_change_rollback(change=change, user=ops, reason="After the upgrade")
services.rule_change_approve(change=rollback, user=ops2)
services.rule_change_apply(change=rollback, user=ops)
quota.refresh_from_db()
change.refresh_from_db()
print(json.dumps({"guarantee": quota.guarantee, "status": change.status,
                  "history": history, "rollback": rollback.pk,
                  "last": quota.history.order_by("history_id").last().rule_change_id}))
"""


def _server() -> str:
    url = os.environ.get("DATABASE_URL", "")
    require_service("PostgreSQL (DATABASE_URL=postgres://...)", url.startswith("postgres"), url)
    return url.rsplit("/", 1)[0]


def _run(args: list[str], *, cwd: Path, database: str, timeout: int = 900) -> str:
    env = {
        **os.environ,
        "DATABASE_URL": database,
        "ARBITER_ENV_FILE": "",
        "DJANGO_DEBUG": "1",
        "DJANGO_SETTINGS_MODULE": "governance.settings",
        # The reviews are built in the process that asks (no worker in this test).
        "CELERY_TASK_ALWAYS_EAGER": "1",
        "ARBITER_DATA_DIR": str(cwd.parent / f"var-{cwd.name}"),
        "PYTHON": sys.executable,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{args} in {cwd}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _python(code: str, *args: str, cwd: Path, database: str) -> dict:
    out = _run([sys.executable, "-c", code, *args], cwd=cwd, database=database)
    return json.loads(out.strip().splitlines()[-1])


def _psql(server: str, sql: str) -> None:
    subprocess.run(["psql", f"{server}/postgres", "-qc", sql], check=True, capture_output=True)


@pytest.fixture
def release(tmp_path) -> Path:
    """The release's code, as ``git archive`` gives it (no .git, no untracked files)."""
    base = Path(settings.BASE_DIR)
    has = subprocess.run(
        ["git", "-C", str(base), "cat-file", "-e", f"{RELEASE}^{{commit}}"], capture_output=True
    )
    require_service(f"git history with release {RELEASE}", has.returncode == 0, has.stderr.decode())
    target = tmp_path / "release"
    target.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(base), "archive", "--format=tar", RELEASE],
        check=True,
        capture_output=True,
    )
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


@pytest.fixture
def databases():
    server = _server()
    names = [f"arbiter_upgrade_{uuid.uuid4().hex[:8]}", f"arbiter_restored_{uuid.uuid4().hex[:8]}"]
    _psql(server, f'create database "{names[0]}"')
    yield server, names
    for name in names:
        _psql(server, f'drop database if exists "{name}" with (force)')


def test_the_last_release_upgrades_with_its_data_and_a_backup_restores(
    release, databases, tmp_path
):
    server, (name, restored_name) = databases
    database, restored = f"{server}/{name}", f"{server}/{restored_name}"
    code = Path(settings.BASE_DIR)
    for tool in ("pg_dump", "pg_restore", "psql"):
        require_service(tool, shutil.which(tool) is not None, f"{tool} not on PATH")

    # The release, as a site ran it, with the demo's data and one more applied change.
    _run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=release, database=database)
    for command in DEMO_LOAD:
        _run([sys.executable, "manage.py", command], cwd=release, database=database)
    made = _python(CHANGE_BEFORE_UPGRADE, cwd=release, database=database)
    assert made["after"] == made["before"] - 1
    rows = _python(COUNT_ROWS, cwd=release, database=database)
    for label in (
        "governance.RuleChange",
        "governance.HistoricalQuota",
        "queues.WorkloadJob",
        "approvals.UpgradeRequest",
        "reports.MonthlyReview",
    ):
        assert rows.get(label), (label, rows)

    # The upgrade: this code migrates the release's database.
    started = time.monotonic()
    _run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=code, database=database)
    upgrade_seconds = time.monotonic() - started
    _run([sys.executable, "manage.py", "migrate", "--check"], cwd=code, database=database)
    upgraded = _python(COUNT_ROWS, cwd=code, database=database)
    # Every row kept; a model added since the release adds its content type and permissions.
    grows = {"contenttypes.ContentType", "auth.Permission"}
    assert {label: upgraded.get(label) for label in rows if label not in grows} == {
        label: count for label, count in rows.items() if label not in grows
    }
    assert all(upgraded.get(label, 0) >= rows.get(label, 0) for label in grows)
    print(f"upgrade from {RELEASE}: migrate took {upgrade_seconds:.1f} s on the demo's data")

    # The README's backup, before anything else changes.
    backup = tmp_path / "arbiter.dump"
    _run(["bash", "deploy/backup.sh", str(backup)], cwd=code, database=database)

    # A change made before the upgrade rolls back with this code.
    undone = _python(ROLLBACK, json.dumps(made), cwd=code, database=database)
    assert undone["guarantee"] == made["before"]
    assert undone["status"] == "rolled_back"
    assert made["change"] in undone["history"] and undone["last"] == undone["rollback"]

    # The README's restore into a new database: the rows of the backup, and the rollback again.
    _psql(server, f'create database "{restored_name}"')
    _run(["bash", "deploy/restore.sh", str(backup)], cwd=code, database=restored)
    assert _python(COUNT_ROWS, cwd=code, database=restored) == upgraded
    again = _python(ROLLBACK, json.dumps(made), cwd=code, database=restored)
    assert again["guarantee"] == made["before"] and again["status"] == "rolled_back"
    assert made["change"] in again["history"]

    # Restoring over a database that has data is refused, and changes nothing.
    refused = subprocess.run(
        ["bash", "deploy/restore.sh", str(backup)],
        cwd=code,
        env={**os.environ, "DATABASE_URL": restored, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0 and "restore into a new, empty one" in refused.stderr
