import pytest
from django.core.exceptions import ValidationError

from governance import services
from governance.models import GpuFlavor

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("labels", "taints"),
    [
        ({"bad key!": "x"}, []),
        ({"gpu": "not valid value!"}, []),
        ({}, [{"key": "gpu", "effect": "Sometimes"}]),
        ({}, [{"key": "gpu", "effect": "NoSchedule", "extra": 1}]),
        (["not", "a", "dict"], []),
    ],
)
def test_flavor_labels_and_taints_are_validated(ops, labels, taints):
    with pytest.raises(ValidationError):
        services.flavor_create(
            user=ops,
            reason="New flavor",
            slug="l40s",
            name="L40S",
            gpu_model="NVIDIA L40S",
            memory_gb=48,
            node_labels=labels,
            node_taints=taints,
        )

    assert not GpuFlavor.objects.filter(slug="l40s").exists()


def test_a_valid_flavor_is_saved(ops):
    flavor = services.flavor_create(
        user=ops,
        reason="New flavor",
        slug="l40s",
        name="L40S",
        gpu_model="NVIDIA L40S",
        memory_gb=48,
        gres_type="l40s",
        node_labels={"nvidia.com/gpu.product": "L40S"},
        node_taints=[{"key": "nvidia.com/gpu", "value": "l40s", "effect": "NoSchedule"}],
    )

    assert flavor.history.get().history_change_reason == "New flavor"


def test_a_forbidden_class_is_never_preempted(world):
    with pytest.raises(ValidationError) as excinfo:
        services.preemption_class_update(
            preemption_class=world.forbidden,
            user=world.ops,
            reason="Loosen",
            data={"max_preemptions_per_day": 2},
        )

    assert "max_preemptions_per_day" in excinfo.value.message_dict


def test_verified_checkpoints_need_an_interval(world):
    with pytest.raises(ValidationError) as excinfo:
        services.preemption_class_update(
            preemption_class=world.cautious,
            user=world.ops,
            reason="Checkpoint",
            data={"requires_verified_checkpoint": True},
        )

    assert "max_checkpoint_interval_minutes" in excinfo.value.message_dict
