"""Two approvers deciding one request at the same moment give one decision (PostgreSQL)."""

import threading
from collections.abc import Callable

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, connections

from approvals import services
from approvals.models import Approval, RequestState
from governance.models import Grant
from tests.approvals.conftest import HOUR, T0, quota_exception
from tests.conftest import require_service

pytestmark = pytest.mark.django_db(transaction=True)


def _race(*actions: Callable[[], object]) -> list[str]:
    barrier = threading.Barrier(len(actions))
    outcomes: list[str] = []

    def run(action: Callable[[], object]) -> None:
        try:
            barrier.wait(timeout=10)
            action()
            outcomes.append("done")
        except (ValidationError, PermissionDenied) as exc:
            outcomes.append("refused: " + " ".join(getattr(exc, "messages", [str(exc)])))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(action,)) for action in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes


def _require_postgresql() -> None:
    require_service(
        "PostgreSQL",
        connection.vendor == "postgresql",
        "row locks (select_for_update) need PostgreSQL: set DATABASE_URL=postgres://...",
    )


def test_two_approvers_at_once_give_one_approval_and_one_grant(
    world, policies, lead, ops, second_ops
):
    _require_postgresql()
    request = quota_exception(world, lead)  # one approver from ops decides

    outcomes = _race(
        lambda: services.request_approve(request=request, user=ops, now=T0 - HOUR),
        lambda: services.request_approve(request=request, user=second_ops, now=T0 - HOUR),
    )

    assert sorted(outcome.split(":")[0] for outcome in outcomes) == ["done", "refused"]
    assert "is approved" in next(o for o in outcomes if o.startswith("refused"))
    request.refresh_from_db()
    assert request.state == RequestState.APPROVED
    assert Approval.objects.filter(request=request).count() == 1
    assert Grant.objects.filter(source=f"request:{request.pk}").count() == 1


def test_an_approval_and_a_rejection_at_once_give_one_decision(
    world, policies, lead, ops, second_ops
):
    _require_postgresql()
    request = quota_exception(world, lead)

    outcomes = _race(
        lambda: services.request_approve(request=request, user=ops, now=T0 - HOUR),
        lambda: services.request_reject(
            request=request, user=second_ops, reason="No", now=T0 - HOUR
        ),
    )

    assert sorted(outcome.split(":")[0] for outcome in outcomes) == ["done", "refused"]
    request.refresh_from_db()
    assert request.state in (RequestState.APPROVED, RequestState.REJECTED)
    assert Approval.objects.filter(request=request).count() == 1
    assert Grant.objects.count() == (1 if request.state == RequestState.APPROVED else 0)
