"""What the home page may keep between requests, and when it must read again.

Most of the home page changes only when the rules, the requests or the reviews change: the
pools' capacity against their guarantees, the tiers due for review, the tiers a person owns,
the requests waiting for them and for their projects, the latest review. Those parts are
rendered once and kept in the cache under a key that names everything they were read from:

- the **fingerprint**: the newest history row of every governed model they show (every write
  of a governed row, by a service or in bulk ``with_history``, adds one, so any change makes
  a new fingerprint), the newest approval (approvals are only ever added) and rules revision,
  and the reviews' newest row, newest build and number built;
- the reader (their inbox and tiers are their own), their language and the day (what is due
  follows the date).

The fingerprint is one query of index lookups (``MAX`` of a primary key per table), built once
per process. What changes without a history row is read on every request instead: a
project's running and waiting jobs and the grants in force now (``project_summaries``).
"""

from __future__ import annotations

import functools
import hashlib
from datetime import date
from typing import Any

from django.db import connection

from approvals.models import Approval, ApprovalPolicy, UpgradeRequest
from governance.models import (
    GpuFlavor,
    Grant,
    Membership,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PriorityTier,
    Project,
    Quota,
    RulesRevision,
    User,
)
from governance.selectors import newest_row_columns
from reports.models import MonthlyReview, ReviewStatus

# Governed models whose rows the cached parts show (their history marks every write).
FINGERPRINT_MODELS = (
    User,
    Project,
    Membership,
    Quota,
    Pool,
    PoolCapacity,
    GpuFlavor,
    PriorityTier,
    PreemptionClass,
    Grant,
    UpgradeRequest,
    ApprovalPolicy,
)
# Bump when what the cached parts hold changes shape (a deploy then reads afresh).
VERSION = 1


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


@functools.cache
def fingerprint_sql() -> str:
    """One SELECT of index lookups: the newest history id of each model, the newest approval
    and revision, and the reviews' newest id, newest build and number built."""
    columns = newest_row_columns(
        FINGERPRINT_MODELS,
        tables=[(Approval._meta.db_table, "id"), (RulesRevision._meta.db_table, "id")],
    )
    reviews = _quote(MonthlyReview._meta.db_table)
    done = f"CASE WHEN {_quote('status')} = '{ReviewStatus.DONE.value}' THEN 1 ELSE 0 END"
    for aggregate in (f"MAX({_quote('id')})", f"MAX({_quote('built_at')})", f"SUM({done})"):
        columns.append(f"(SELECT {aggregate} FROM {reviews})")
    return "SELECT " + ", ".join(columns)


def home_fingerprint() -> str:
    """The fingerprint (see the module's docstring), as a short string."""
    with connection.cursor() as cursor:
        cursor.execute(fingerprint_sql())
        row: tuple[Any, ...] = tuple(cursor.fetchone() or ())
    return hashlib.sha1(repr(row).encode(), usedforsecurity=False).hexdigest()[:20]


def home_cache_key(*, user_id: int, language: str, today: date, fingerprint: str) -> str:
    return f"arbiter:home:v{VERSION}:{user_id}:{language}:{today.isoformat()}:{fingerprint}"
