"""One reasoned save for every app: the same reason check (required, at most 1,000
characters) and a history row with the user and the reason, in governance, approvals and
queues alike."""

import pytest
from django.core.exceptions import ValidationError

from approvals import services as approvals
from approvals.models import ApprovalPolicy, RequestKind
from governance import services
from governance.models import Project
from governance.services import REASON_MAX_LENGTH
from queues import services as queues
from queues.models import Cluster

pytestmark = pytest.mark.django_db

WRITES = {
    "project": lambda world, reason: services.project_create(
        user=world.ops, reason=reason, slug="audio", name="Audio"
    ),
    "policy": lambda world, reason: approvals.policy_create(
        user=world.ops,
        reason=reason,
        kind=RequestKind.QUOTA_EXCEPTION,
        max_duration_days=7,
        monthly_flag_threshold=2,
    ),
    "cluster": lambda world, reason: queues.cluster_create(
        user=world.ops, reason=reason, name="lab", slurm_cluster="lab", pools=[world.training]
    ),
}
MODELS = {"project": Project, "policy": ApprovalPolicy, "cluster": Cluster}


@pytest.mark.parametrize("write", WRITES)
@pytest.mark.parametrize("reason", ["", "   ", "x" * (REASON_MAX_LENGTH + 1)])
def test_every_app_refuses_the_same_bad_reasons(world, write, reason):
    before = MODELS[write].objects.count()
    with pytest.raises(ValidationError) as refused:
        WRITES[write](world, reason)
    assert list(refused.value.message_dict) == ["reason"]
    assert MODELS[write].objects.count() == before


@pytest.mark.parametrize("write", WRITES)
def test_every_app_records_the_user_and_the_reason(world, write):
    reason = "y" * REASON_MAX_LENGTH
    obj = WRITES[write](world, f"  {reason}  ")
    record = obj.history.latest()
    assert (record.history_user, record.history_change_reason) == (world.ops, reason)
