"""One demo load at a time: two ``seed_demo`` runs started together (two containers of a
stack, a person and a script) would each find no demo user and both create ``ops``, and the
second would fail on the unique username; two ``seed_demo_workload`` runs would both replay
the history and race on its jobs, two ``seed_demo_approvals`` both file the same requests.
A transaction-scoped PostgreSQL advisory lock makes the second wait until the first has
committed; it then finds everything and adds nothing. SQLite (the demo's file database) lets
one writer in at a time anyway.

Every demo seeding service takes it first, in the transaction that does all its writes
(``demo_seed``, ``demo_clusters_ensure``, ``demo_workload_seed``, ``demo_approvals_seed``,
``demo_reviews_seed``): ``tests/governance/test_seed_demo_locks.py`` finds every
``seed_demo*`` command and every demo seeding service and fails on one that does not."""

import zlib

from django.db import connection

# The lock's key: a fixed number derived from its name (advisory locks are keyed by integers).
DEMO_LOCK_KEY = zlib.crc32(b"arbiter:demo-seed")


def demo_lock() -> None:
    """Wait for, and hold until the current transaction ends, the demo load's lock (call it
    inside the transaction of the seeding's writes)."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [DEMO_LOCK_KEY])
