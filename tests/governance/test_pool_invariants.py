"""Pool rules: capacity holds the guarantees, a child pool fits its parent, no cycles."""

import pytest
from django.core.exceptions import ValidationError

from governance import services
from governance.models import PoolCapacity

pytestmark = pytest.mark.django_db


def test_capacity_cannot_drop_below_the_guarantees(world):
    with pytest.raises(ValidationError) as excinfo:
        services.pool_capacity_set(
            pool=world.training, flavor=world.a100, gpus=39, user=world.ops, reason="Shrink"
        )

    message = excinfo.value.message_dict["gpus"][0]
    assert "39" in message and "40" in message
    assert PoolCapacity.objects.get(pool=world.training, flavor=world.a100).gpus == 64


def test_child_pools_must_fit_their_parent(world):
    child = services.pool_create(
        user=world.ops,
        reason="Sub-pool",
        slug="vision-lab",
        name="Vision lab",
        parent=world.training,
    )
    services.pool_capacity_set(
        pool=child, flavor=world.a100, gpus=24, user=world.ops, reason="Carve out"
    )

    # 40 guaranteed + 24 in the child = 64: full. One more GPU does not fit.
    with pytest.raises(ValidationError) as excinfo:
        services.pool_capacity_set(
            pool=child, flavor=world.a100, gpus=25, user=world.ops, reason="Grow"
        )

    message = excinfo.value.message_dict["gpus"][0]
    assert "Training" in message and "65" in message
    assert PoolCapacity.objects.get(pool=child, flavor=world.a100).gpus == 24


def test_moving_a_pool_under_a_parent_that_cannot_hold_it_is_refused(world):
    # Inference has 16 A100, none guaranteed in training's sense, but training is full
    # of guarantees only up to 40: moving inference (16) under training fits (56 <= 64).
    services.pool_update(
        pool=world.inference, user=world.ops, reason="Nest", data={"parent": world.training}
    )
    services.pool_capacity_set(
        pool=world.inference, flavor=world.a100, gpus=24, user=world.ops, reason="Grow"
    )
    with pytest.raises(ValidationError):
        services.pool_capacity_set(
            pool=world.inference, flavor=world.a100, gpus=25, user=world.ops, reason="Grow"
        )


def test_a_pool_cannot_be_its_own_ancestor(world):
    child = services.pool_create(
        user=world.ops, reason="Sub-pool", slug="child", name="Child", parent=world.training
    )

    with pytest.raises(ValidationError) as excinfo:
        services.pool_update(
            pool=world.training, user=world.ops, reason="Loop", data={"parent": child}
        )

    assert "parent" in excinfo.value.message_dict
    world.training.refresh_from_db()
    assert world.training.parent is None


def test_negative_capacity_is_refused(world):
    with pytest.raises(ValidationError) as excinfo:
        services.pool_capacity_set(
            pool=world.inference, flavor=world.h100, gpus=-2, user=world.ops, reason="Oops"
        )

    assert "gpus" in excinfo.value.message_dict
    assert not PoolCapacity.objects.filter(pool=world.inference, flavor=world.h100).exists()
