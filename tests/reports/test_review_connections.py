"""The review's queries on several connections at once (PostgreSQL, called outside a
transaction): the numbers of one connection, every connection reading the caller's snapshot."""

import threading

import pytest
from django.db import connection, connections, transaction

from governance import services as governance
from governance.models import Project
from reports.selectors import _sql, review_metrics, review_metrics_by_project
from tests.conftest import REASON, require_service
from tests.reports.test_review_metrics import W0, W1, history  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def _needs_postgres() -> None:
    require_service(
        "PostgreSQL",
        connection.vendor == "postgresql",
        "an exported snapshot needs PostgreSQL: set DATABASE_URL=postgres://...",
    )


def test_several_connections_give_the_numbers_of_one(history, settings, monkeypatch):  # noqa: F811
    _needs_postgres()
    # Which way each review ran: with a snapshot (several connections) or without.
    snapshots: list[str | None] = []
    run_all = _sql.run_all

    def recording(tasks, *, snapshot, prepare):
        snapshots.append(snapshot)
        return run_all(tasks, snapshot=snapshot, prepare=prepare)

    monkeypatch.setattr(_sql, "run_all", recording)
    settings.ARBITER_REVIEW_CONNECTIONS = 2
    assert not connection.in_atomic_block
    metrics, views = review_metrics_by_project(start=W0, end=W1)
    assert snapshots.pop() is not None
    assert set(views) == {"vision", "speech"}
    assert metrics["waits"]["overall"]["jobs"] == 8
    # The same numbers from one connection, one query after another.
    settings.ARBITER_REVIEW_CONNECTIONS = 1
    assert review_metrics_by_project(start=W0, end=W1) == (metrics, views)
    assert snapshots.pop() is None
    # Inside a transaction (its own writes are invisible to other connections): one
    # connection, whatever the setting.
    settings.ARBITER_REVIEW_CONNECTIONS = 2
    with transaction.atomic():
        assert review_metrics_by_project(start=W0, end=W1) == (metrics, views)
    assert snapshots.pop() is None
    for pool in (None, "training"):
        for project in (None, "vision", "speech"):
            scope = {"start": W0, "end": W1, "pool": pool, "project": project}
            parallel = review_metrics(**scope)
            settings.ARBITER_REVIEW_CONNECTIONS = 1
            assert review_metrics(**scope) == parallel, scope
            settings.ARBITER_REVIEW_CONNECTIONS = 2
    assert len(snapshots) == 12 and None not in snapshots[0::2]
    assert snapshots[1::2] == [None] * 6


def _backend() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def test_every_connection_reads_the_exported_snapshot(world, settings):
    _needs_postgres()
    settings.ARBITER_REVIEW_CONNECTIONS = 2
    before = Project.objects.count()

    def commit_a_project() -> None:
        try:
            governance.project_create(user=world.ops, reason=REASON, slug="late", name="Late")
        finally:
            connections.close_all()

    with transaction.atomic():
        snapshot = _sql.snapshot_export(outermost=True)
        assert snapshot
        mine = _backend()
        # Another connection commits a project after the snapshot was taken.
        writer = threading.Thread(target=commit_a_project)
        writer.start()
        writer.join()
        tasks = [Project.objects.count, _backend] * 3
        results = _sql.run_all(tasks, snapshot=snapshot, prepare=lambda: None)
        counts, backends = results[0::2], results[1::2]
        assert counts == [before] * 3  # the project committed later is not in the snapshot
        assert mine not in backends  # each task on a connection of its own
        assert Project.objects.count() == before  # nor in this transaction's
    assert Project.objects.count() == before + 1


def test_a_snapshot_id_is_checked_before_it_is_used(settings):
    _needs_postgres()
    settings.ARBITER_REVIEW_CONNECTIONS = 2
    with pytest.raises(ValueError, match="snapshot"):
        _sql.run_all([_backend, _backend], snapshot="x'; DROP TABLE y; --", prepare=lambda: None)


def test_one_connection_runs_the_tasks_in_order(settings):
    settings.ARBITER_REVIEW_CONNECTIONS = 1
    with transaction.atomic():
        assert _sql.snapshot_export(outermost=True) is None
    seen: list[int] = []
    tasks = [lambda n=n: seen.append(n) or n for n in range(4)]
    assert _sql.run_all(tasks, snapshot=None, prepare=lambda: None) == [0, 1, 2, 3]
    assert seen == [0, 1, 2, 3]
