"""Quota rules: one-row invariants in the database, pool capacity in the service."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from governance import services
from governance.models import Quota

pytestmark = pytest.mark.django_db


def _create(world, **overrides):
    kwargs = {
        "user": world.ops,
        "reason": "New project quota",
        "project": world.speech,
        "pool": world.training,
        "flavor": world.h100,
        "guarantee": 8,
        "preemption_class": world.allowed,
    }
    kwargs.update(overrides)
    return services.quota_create(**kwargs)


def test_create_records_user_and_reason_in_history(world):
    quota = _create(world)

    record = quota.history.get()
    assert record.history_user == world.ops
    assert record.history_change_reason == "New project quota"
    assert record.history_type == "+"


def test_reason_is_required(world):
    with pytest.raises(ValidationError) as excinfo:
        _create(world, reason="   ")

    assert "reason" in excinfo.value.message_dict
    assert not Quota.objects.filter(project=world.speech, flavor=world.h100).exists()


def test_only_ops_may_change_quotas(world, lead):
    with pytest.raises(PermissionDenied):
        _create(world, user=lead)
    with pytest.raises(PermissionDenied):
        services.quota_update(
            quota=world.vision_a100, user=lead, reason="More", data={"guarantee": 30}
        )

    world.vision_a100.refresh_from_db()
    assert world.vision_a100.guarantee == 24


def test_negative_guarantee_is_rejected(world):
    with pytest.raises(ValidationError) as excinfo:
        _create(world, guarantee=-1)

    assert "guarantee" in excinfo.value.message_dict
    assert not Quota.objects.filter(project=world.speech, flavor=world.h100).exists()


def test_lending_limit_above_guarantee_is_rejected_with_the_numbers(world):
    with pytest.raises(ValidationError) as excinfo:
        services.quota_update(
            quota=world.vision_a100,
            user=world.ops,
            reason="Lend more",
            data={"lending_limit": 30},
        )

    message = excinfo.value.message_dict["lending_limit"][0]
    assert "30" in message and "24" in message
    world.vision_a100.refresh_from_db()
    assert world.vision_a100.lending_limit == 12
    assert world.vision_a100.history.count() == 1


def test_guarantees_may_not_exceed_pool_capacity(world):
    # Training holds 64 A100; vision (24) and speech (16) already hold 40.
    with pytest.raises(ValidationError) as excinfo:
        services.quota_update(
            quota=world.speech_a100, user=world.ops, reason="Grow", data={"guarantee": 41}
        )

    message = excinfo.value.message_dict["guarantee"][0]
    assert "64" in message and "65" in message and "Training" in message
    world.speech_a100.refresh_from_db()
    assert world.speech_a100.guarantee == 16
    assert world.speech_a100.history.count() == 1


def test_guarantee_up_to_capacity_is_accepted(world):
    services.quota_update(
        quota=world.speech_a100, user=world.ops, reason="Grow", data={"guarantee": 40}
    )

    world.speech_a100.refresh_from_db()
    assert world.speech_a100.guarantee == 40


def test_a_flavor_the_pool_lacks_cannot_be_guaranteed(world):
    with pytest.raises(ValidationError) as excinfo:
        _create(world, pool=world.inference, flavor=world.h100, guarantee=1)

    assert "has 0 H100 80G GPUs" in excinfo.value.message_dict["guarantee"][0]


def test_one_quota_per_project_pool_and_flavor(world):
    with pytest.raises(ValidationError) as excinfo:
        _create(world, project=world.vision, flavor=world.a100, guarantee=0)

    assert excinfo.value.messages
    assert Quota.objects.filter(project=world.vision, flavor=world.a100).count() == 1


def test_update_with_no_change_writes_no_history(world):
    services.quota_update(
        quota=world.vision_a100, user=world.ops, reason="Nothing", data={"guarantee": 24}
    )

    assert world.vision_a100.history.count() == 1


def test_unknown_fields_are_refused(world):
    with pytest.raises(ValidationError) as excinfo:
        services.quota_update(
            quota=world.vision_a100, user=world.ops, reason="Move", data={"pool": world.inference}
        )

    assert "pool" in excinfo.value.message_dict


@pytest.mark.parametrize(
    ("field", "value"),
    [("lending_limit", 99), ("guarantee", -5), ("fair_share_weight", 0)],
)
def test_the_database_itself_refuses_bad_rows(world, field, value):
    with pytest.raises(IntegrityError), transaction.atomic():
        Quota.objects.filter(pk=world.vision_a100.pk).update(**{field: value})
