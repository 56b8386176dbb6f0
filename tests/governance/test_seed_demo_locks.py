"""Every way of loading the demo takes the demo's lock (issue 35), so that two containers
seeding at once load it one after the other (``governance/services/demo/lock.py``).

Found, not listed: every ``seed_demo*`` management command of the project, and every demo
seeding service (a public ``demo_…_seed`` or ``demo_…_ensure`` of an app's services). Each
service must call ``demo_lock`` (itself or through a function of its module it calls); each
command must call such a service; and on PostgreSQL each command, run while another session
holds the lock, must wait for it (seen in ``pg_locks``) and finish once it is released."""

import ast
import threading
import time
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command, get_commands
from django.db import connection, transaction

from governance.services.demo import DEMO_LOCK_KEY
from tests.conftest import require_service

APPS = ("governance", "queues", "approvals", "reports")
SERVICE = "demo_"
SEEDS = ("_seed", "_ensure")
# Each command's quickest arguments; the commands run in this order (as ``make run`` does).
ORDER = ["seed_demo", "seed_demo_workload", "seed_demo_approvals", "seed_demo_reviews"]
ARGS = {"seed_demo_workload": ["--days", "2"], "seed_demo_reviews": ["--months", "1"]}
# What the class must at least hold: the test cannot pass by finding nothing.
KNOWN = {
    "demo_seed",
    "demo_clusters_ensure",
    "demo_workload_seed",
    "demo_approvals_seed",
    "demo_reviews_seed",
}


def _services_modules() -> dict[str, ast.Module]:
    root = Path(settings.BASE_DIR)
    found = {}
    for app in APPS:
        paths = [root / app / "services.py", *(root / app / "services").rglob("*.py")]
        for path in paths:
            if path.is_file():
                found[str(path.relative_to(root))] = ast.parse(path.read_text(), str(path))
    return found


def _calls(function: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute):
                names.add(func.attr)
    return names


def _locks(name: str, functions: dict[str, ast.AST], seen: set[str]) -> bool:
    """Whether ``name`` calls ``demo_lock``, itself or through its module's functions."""
    if name in seen or name not in functions:
        return False
    seen.add(name)
    called = _calls(functions[name])
    return "demo_lock" in called or any(_locks(other, functions, seen) for other in called)


def demo_services() -> dict[str, bool]:
    """Every demo seeding service → whether it takes the demo's lock."""
    found = {}
    for module in _services_modules().values():
        functions: dict[str, ast.AST] = {
            node.name: node
            for node in ast.walk(module)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        for name in functions:
            if name.startswith(SERVICE) and name.endswith(SEEDS):
                found[name] = _locks(name, functions, set())
    return found


def demo_commands() -> list[str]:
    names = [name for name in get_commands() if name.startswith("seed_demo")]
    return sorted(names, key=lambda name: (ORDER.index(name) if name in ORDER else 99, name))


def test_every_demo_seeding_service_takes_the_lock():
    found = demo_services()
    assert set(found) >= KNOWN, KNOWN - set(found)
    assert [name for name, locks in found.items() if not locks] == []


def test_every_demo_seeding_command_calls_a_locking_service():
    services = {name for name, locks in demo_services().items() if locks}
    commands = demo_commands()
    assert set(ORDER) <= set(commands)
    for name in commands:
        module = __import__(f"{get_commands()[name]}.management.commands.{name}", fromlist=["_"])
        source = ast.parse(Path(module.__file__).read_text())
        assert _calls(source) & services, f"{name} calls no demo seeding service that locks"


@pytest.mark.django_db(transaction=True)
def test_every_demo_seeding_command_waits_for_a_seeding_under_way(settings):
    require_service(
        "PostgreSQL",
        connection.vendor == "postgresql",
        "the demo's lock is PostgreSQL's (advisory lock): set DATABASE_URL=postgres://...",
    )
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    for name in demo_commands():
        _waits_for_the_lock(name, ARGS.get(name, []))


def _waiting_for_the_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 1",
            [DEMO_LOCK_KEY >> 32, DEMO_LOCK_KEY & 0xFFFFFFFF],
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _waits_for_the_lock(name: str, args: list[str]) -> None:
    """Hold the lock (a seeding under way); run ``name`` beside it: it must wait, then finish."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            call_command(name, *args, stdout=StringIO())
        except BaseException as error:  # reported below
            failures.append(error)
        finally:
            connection.close()  # the thread's own connection

    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [DEMO_LOCK_KEY])
        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 120
        while not _waiting_for_the_lock():
            assert thread.is_alive(), f"{name} finished without waiting for the demo's lock"
            assert time.monotonic() < deadline, f"{name} never asked for the demo's lock"
            time.sleep(0.05)
        assert thread.is_alive()
    thread.join(timeout=600)  # the lock is released: it goes on
    assert not thread.is_alive(), f"{name} did not finish"
    assert failures == [], (name, failures)
