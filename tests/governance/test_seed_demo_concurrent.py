"""Two ``seed_demo`` runs started at the same moment (two containers of the compose stack
seeding together): both succeed, the demo is loaded once, and the later run adds nothing.
Without the demo's lock both found no user ``ops`` and the second failed on the username."""

import threading
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from governance.models import PriorityTier, Project, Quota, RuleChange, User
from governance.services.demo import PEOPLE, PROJECTS, QUOTAS, TIERS
from tests.conftest import require_service

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_two_seed_demo_runs_at_once_load_the_demo_once():
    require_service(
        "PostgreSQL",
        connection.vendor == "postgresql",
        "the demo's lock is PostgreSQL's (advisory lock): set DATABASE_URL=postgres://...",
    )
    start = threading.Barrier(2)
    said: list[str] = []
    failures: list[BaseException] = []

    def seed() -> None:
        out = StringIO()
        try:
            start.wait(timeout=30)
            call_command("seed_demo", stdout=out)
            said.append(out.getvalue())
        except BaseException as error:  # reported by the assertion below
            failures.append(error)
        finally:
            connection.close()  # each thread has its own connection

    threads = [threading.Thread(target=seed) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert failures == []
    assert sorted(text.split(":")[0].strip(".\n") for text in said) == [
        "Demo data already loaded; nothing to add",
        "Demo data loaded",
    ], said
    assert User.objects.filter(username__in=[p[0] for p in PEOPLE]).count() == len(PEOPLE)
    assert PriorityTier.objects.count() == len(TIERS)
    assert Project.objects.count() == len(PROJECTS)
    assert Quota.objects.count() == len(QUOTAS)
    assert RuleChange.objects.count() > 0
