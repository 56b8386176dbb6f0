"""Every governed rule kind is one registered declaration (docs/rule-kinds.md): the change
machinery finds each kind, its fields and its objects through the registry alone."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from approvals.models import ApprovalPolicy
from governance import selectors, services
from governance.models import (
    GpuFlavor,
    Membership,
    Pool,
    PreemptionClass,
    PriorityTier,
    Project,
    Quota,
    User,
)
from governance.selectors.changes import EXISTS, REGISTRY, model_field, rule_kind_for
from queues import services as queue_services
from queues.models import Cluster
from tests.conftest import REASON

pytestmark = pytest.mark.django_db


def test_every_governed_model_is_registered_in_the_order_pages_list_them():
    assert selectors.object_types() == [
        "project",
        "flavor",
        "pool",
        "tier",
        "preemption_class",
        "quota",
        "user",
        "cluster",
        "approval_policy",
    ]
    assert [kind.model for kind in REGISTRY.values()] == [
        Project,
        GpuFlavor,
        Pool,
        PriorityTier,
        PreemptionClass,
        Quota,
        User,
        Cluster,
        ApprovalPolicy,
    ]


@pytest.mark.parametrize("kind", list(REGISTRY.values()), ids=lambda kind: kind.object_type)
def test_each_declaration_names_real_fields_and_pages(kind):
    for name in (*kind.fields, *kind.snapshot_fields, *kind.required_fields):
        assert model_field(kind.model, name) is not None, name
    assert set(kind.required_fields) <= set(kind.snapshot_fields)
    for name in kind.keyed:
        # A keyed field is no model field: its value lives in the key's rows.
        assert model_field(kind.model, name) is None, name
    assert kind.edit_kind(EXISTS) == (kind.exists_kind if kind.creatable else None)
    assert kind.edit_kind("no_such_field") is None
    assert reverse(f"{kind.pages}_list")


def test_objects_are_named_and_found_by_their_kind(world, ops):
    cluster = queue_services.cluster_create(
        user=ops, reason=REASON, name="lab", slurm_cluster="arbiter"
    )
    for obj, key in [
        (world.vision, "vision"),
        (world.a100, "a100-80g"),
        (world.training, "training"),
        (world.regular, "regular"),
        (world.allowed, world.allowed.slug),
        (world.vision_a100, str(world.vision_a100.pk)),
        (ops, "ops"),
        (cluster, "lab"),
    ]:
        kind = rule_kind_for(type(obj))
        assert kind is not None
        assert selectors.object_key(obj) == key
        assert selectors.object_lookup(kind.object_type, key) == obj
        assert selectors.object_type_of(type(obj)) == kind.object_type
    assert selectors.object_lookup("quota", "not-a-number") is None
    assert selectors.object_lookup("nothing", "vision") is None


def test_a_model_that_is_no_rule_kind_cannot_be_edited_through_a_change(world, ops):
    membership = Membership.objects.filter(project=world.vision).first()
    assert membership is not None and rule_kind_for(Membership) is None
    with pytest.raises(ValidationError) as error:
        services.rule_change_create(
            user=ops,
            reason=REASON,
            edits=[services.EditSpec(target=membership, field="role", value="lead")],
        )
    assert error.value.message_dict == {"role": ["This field cannot be changed here."]}
    with pytest.raises(ValidationError):
        services.rule_object_propose_create(
            user=ops, reason=REASON, model=Membership, data={"role": "lead"}
        )


def test_fields_a_kind_does_not_declare_are_refused_before_anything_is_recorded(world, ops):
    with pytest.raises(ValidationError) as error:
        services.rule_object_propose_update(
            obj=world.vision, user=ops, reason=REASON, data={"slug": "vision-2"}
        )
    assert error.value.message_dict == {"slug": ["This field cannot be changed here."]}
    with pytest.raises(ValidationError) as error:
        services.rule_object_propose_create(
            user=ops, reason=REASON, model=Project, data={"slug": "x", "name": "X", "bogus": 1}
        )
    assert error.value.message_dict == {"bogus": ["This field cannot be changed here."]}
    assert not Project.objects.filter(slug="x").exists()
