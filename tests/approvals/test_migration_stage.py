"""The migration that gives the grant terms one home and derives the request state keeps every
existing request and grant, and each request still reads the state it had."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from approvals.models import RequestStage, RequestState, UpgradeRequest
from governance.models import Grant

BEFORE = [("governance", "0003_rule_changes_and_reviews"), ("approvals", "0001_initial")]
AFTER = [("governance", "0004_grant_terms"), ("approvals", "0002_request_grant_terms_and_stage")]

NOW = timezone.now()
# The state each old row had, and the grant window that gives it now.
OLD_ROWS = {
    "draft": None,
    "submitted": None,
    "rejected": None,
    "withdrawn": None,
    "approved": ("scheduled", NOW + timedelta(days=1), NOW + timedelta(days=2), None),
    "active": ("active", NOW - timedelta(days=1), NOW + timedelta(days=1), None),
    "expired": ("expired", NOW - timedelta(days=3), NOW - timedelta(days=1), None),
    "revoked": (
        "revoked",
        NOW - timedelta(days=3),
        NOW + timedelta(days=1),
        NOW - timedelta(days=2),
    ),
}


@pytest.mark.django_db(transaction=True)
def test_every_request_keeps_its_state_and_its_grant():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    user = old.get_model("governance", "User").objects.create(username="lead")
    project = old.get_model("governance", "Project").objects.create(slug="vision", name="Vision")
    protection = old.get_model("governance", "PreemptionClass").objects.create(
        slug="forbidden", name="Forbidden", kind="forbidden", business_impact="Serving."
    )
    OldGrant = old.get_model("governance", "Grant")
    OldRequest = old.get_model("approvals", "UpgradeRequest")
    terms = {"kind": "preemption_protection", "project": project, "preemption_class": protection}
    ids = {}
    for state, grant_row in OLD_ROWS.items():
        grant = None
        starts, ends = NOW + timedelta(days=1), NOW + timedelta(days=2)
        if grant_row is not None:
            grant_state, starts, ends, revoked_at = grant_row
            grant = OldGrant.objects.create(
                **terms, state=grant_state, starts_at=starts, ends_at=ends, revoked_at=revoked_at
            )
        ids[state] = OldRequest.objects.create(
            **terms,
            state=state,
            requester=user,
            justification=f"Request {state}",
            business_impact="Late.",
            starts_at=starts,
            ends_at=ends,
            grant=grant,
            created_at=NOW - timedelta(days=5),
        ).pk

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    try:
        assert UpgradeRequest.objects.count() == len(OLD_ROWS)
        assert Grant.objects.count() == 4
        for state, pk in ids.items():
            # Columns of later migrations are not there yet: leave them out.
            request = (
                UpgradeRequest.objects.defer("flag_message", "submitted_by")
                .select_related("grant")
                .get(pk=pk)
            )
            assert request.justification == f"Request {state}"
            assert request.state_at(NOW) == RequestState(state), state
            assert request.stage == (
                RequestStage.APPROVED if OLD_ROWS[state] else RequestStage(state)
            )
    finally:
        # Back to the newest schema for the tests that follow.
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
