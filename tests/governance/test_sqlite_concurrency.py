"""On the embedded SQLite default, concurrent writers wait for the lock (BEGIN IMMEDIATE and a
busy timeout) instead of failing with "database is locked"."""

import threading

import pytest
from django.db import connection, connections

from governance import services
from governance.models import RuleChange
from governance.services import EditSpec

WRITERS = 16


@pytest.mark.django_db(transaction=True)
def test_concurrent_proposals_on_sqlite_all_succeed(world):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's locking only: PostgreSQL has row locks (see test_change_concurrency)")
    assert connection.settings_dict["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert connection.settings_dict["NAME"] != ":memory:"  # a file, shared by the threads
    errors: list[BaseException] = []
    start = threading.Barrier(WRITERS)

    def propose(index: int) -> None:
        try:
            start.wait()
            quota = world.vision_a100 if index % 2 else world.speech_a100
            services.rule_change_create(
                user=world.ops,
                reason=f"Writer {index}",
                edits=[EditSpec(target=quota, field="reclaim_grace_minutes", value=index + 1)],
                confirmation_reason="Concurrent writers",
            )
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=propose, args=(index,)) for index in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert RuleChange.objects.count() == WRITERS
