"""Two operators applying the same change at the same moment: one applies it, the other is
told clearly that it was already applied; the edits are written once."""

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, connections

from governance import services
from governance.models import ChangeStatus, Quota, RuleChange
from governance.services import EditSpec
from tests.conftest import require_service


@pytest.mark.django_db(transaction=True)
def test_two_operators_applying_at_once_give_one_application_and_one_conflict(world, ops2):
    require_service(
        "PostgreSQL",
        connection.vendor == "postgresql",
        "row locks (select_for_update) need PostgreSQL: set DATABASE_URL=postgres://...",
    )
    change = services.rule_change_create(
        user=world.ops,
        reason="Deadline",
        edits=[EditSpec(target=world.vision_a100, field="guarantee", value=30)],
    )
    services.rule_change_approve(change=change, user=ops2)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def apply(user) -> None:
        try:
            barrier.wait(timeout=10)
            services.rule_change_apply(change=change, user=user)
            outcomes.append("applied")
        except ValidationError as exc:
            outcomes.append("refused: " + " ".join(exc.messages))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=apply, args=(user,)) for user in (world.ops, ops2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(outcomes) == [
        "applied",
        f"refused: Change #{change.pk} was already applied.",
    ]
    assert RuleChange.objects.get(pk=change.pk).status == ChangeStatus.APPLIED
    assert Quota.objects.get(pk=world.vision_a100.pk).guarantee == 30
    assert Quota.history.filter(rule_change=change).count() == 1
