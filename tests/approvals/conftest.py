"""Approval policies on top of the ``world``, a controllable clock, and a request helper.

The ``approver`` persona owns the "Key project" and "Production service" tiers, so upgrades
to them are theirs to approve; production upgrades need a second approver from ops. Quota
exceptions and preemption protection are decided by ops (``ops`` and ``second_ops``).
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from approvals import services
from approvals.models import ApprovalPolicy, ApproverRule, RequestKind, UpgradeRequest
from governance import services as governance_services
from governance.models import SiteRole, User
from tests.conftest import REASON, World, with_terms

# A fixed instant in the future: every service call gets ``now`` relative to it.
T0 = (timezone.now() + timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


@dataclass
class Policies:
    upgrade: ApprovalPolicy
    production_upgrade: ApprovalPolicy
    queue_jump: ApprovalPolicy
    quota_exception: ApprovalPolicy
    protection: ApprovalPolicy


@pytest.fixture
def second_ops(db) -> User:
    return User.objects.create_user(
        username="ops-two", email="ops-two@example.com", site_role=SiteRole.OPS
    )


@pytest.fixture
def policies(world: World, approver: User) -> Policies:
    kw: dict[str, Any] = {"user": world.ops, "reason": REASON}
    for tier in (world.key, world.production):
        governance_services.tier_update(tier=tier, **kw, data={"owner": approver})
    owner = ApproverRule.TIER_OWNER
    return Policies(
        upgrade=services.policy_create(
            **kw,
            kind=RequestKind.PRIORITY_UPGRADE,
            max_duration_days=14,
            approver=owner,
            monthly_flag_threshold=2,
        ),
        production_upgrade=services.policy_create(
            **kw,
            kind=RequestKind.PRIORITY_UPGRADE,
            tier=world.production,
            max_duration_days=7,
            approver=owner,
            approvals_required=2,
            monthly_flag_threshold=1,
        ),
        queue_jump=services.policy_create(
            **kw,
            kind=RequestKind.QUEUE_JUMP,
            max_duration_days=2,
            approver=owner,
            monthly_flag_threshold=3,
        ),
        quota_exception=services.policy_create(
            **kw, kind=RequestKind.QUOTA_EXCEPTION, max_duration_days=14, monthly_flag_threshold=2
        ),
        protection=services.policy_create(
            **kw,
            kind=RequestKind.PREEMPTION_PROTECTION,
            max_duration_days=7,
            monthly_flag_threshold=2,
        ),
    )


def quota_exception(world: World, user: User, **overrides: Any) -> UpgradeRequest:
    """Vision asks for 8 more A100 in training for three days from T0 (submitted at T0 - 1 h)."""
    values: dict[str, Any] = {
        "user": user,
        "project": world.vision,
        "kind": RequestKind.QUOTA_EXCEPTION,
        "justification": "The ablations for the paper need more GPUs.",
        "business_impact": "The paper deadline is missed.",
        "starts_at": T0,
        "ends_at": T0 + 3 * DAY,
        "pool": world.training,
        "flavor": world.a100,
        "extra_gpus": 8,
        "submit": True,
        "now": T0 - HOUR,
    }
    values.update(overrides)
    return services.request_create(**with_terms(values))


def upgrade(world: World, user: User, **overrides: Any) -> UpgradeRequest:
    """Speech asks to run at a higher tier (Key project unless told) for two days from T0."""
    values: dict[str, Any] = {
        "user": user,
        "project": world.speech,
        "kind": RequestKind.PRIORITY_UPGRADE,
        "justification": "The launch retraining.",
        "business_impact": "The launch moves by two weeks.",
        "starts_at": T0,
        "ends_at": T0 + 2 * DAY,
        "tier": world.key,
        "submit": True,
        "now": T0 - HOUR,
    }
    values.update(overrides)
    return services.request_create(**with_terms(values))


def vision_maximum(rules: Any) -> int | None:
    return rules.projects["vision"].quotas[0].maximum


def at(offset: timedelta) -> datetime:
    return T0 + offset
