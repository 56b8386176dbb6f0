"""Two operators growing guarantees in one pool at once cannot over-commit it."""

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, connections

from governance import services
from governance.models import Quota
from tests.conftest import require_service


@pytest.mark.django_db(transaction=True)
def test_concurrent_guarantee_increases_cannot_overcommit_a_pool(world):
    require_service(
        "PostgreSQL",
        connection.vendor == "postgresql",
        "row locks (select_for_update) need PostgreSQL: set DATABASE_URL=postgres://...",
    )
    # Training holds 64 A100; 40 are guaranteed. Each increase alone fits (56),
    # both together (72) do not.
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def grow(quota: Quota, guarantee: int) -> None:
        try:
            barrier.wait(timeout=10)
            services.quota_update(
                quota=quota, user=world.ops, reason="Deadline", data={"guarantee": guarantee}
            )
            outcomes.append("applied")
        except ValidationError as exc:
            outcomes.append("refused: " + " ".join(exc.messages))
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=grow, args=(world.vision_a100, 40)),
        threading.Thread(target=grow, args=(world.speech_a100, 32)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(outcome.split(":")[0] for outcome in outcomes) == ["applied", "refused"]
    total = sum(
        Quota.objects.filter(pool=world.training, flavor=world.a100).values_list(
            "guarantee", flat=True
        )
    )
    assert total == 56
