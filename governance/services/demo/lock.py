"""One demo load at a time: two ``seed_demo`` runs started together (two containers of a
stack, a person and a script) would each find no demo user and both create ``ops``, and the
second would fail on the unique username. A transaction-scoped PostgreSQL advisory lock makes
the second wait until the first has committed; it then finds everything and adds nothing.
SQLite (the demo's file database) lets one writer in at a time anyway."""

import zlib

from django.db import connection

# The lock's key: a fixed number derived from its name (advisory locks are keyed by integers).
DEMO_LOCK_KEY = zlib.crc32(b"arbiter:demo-seed")


def demo_lock() -> None:
    """Wait for, and hold until the current transaction ends, the demo load's lock."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [DEMO_LOCK_KEY])
