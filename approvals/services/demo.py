"""Demo data of approvals: policies and requests on top of governance's demo organisation.

Idempotent: a policy is created only when its kind and tier have none, a request only when
no request of that project has its justification. Requests go through the same services as
in real use, with the clock set back to when each was filed and decided, by the people who
filed and decided them. Their in-app notifications are kept; their mails are not sent (they
are about the past).
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from approvals.models import ApprovalPolicy, ApproverRule, Decision, RequestKind, UpgradeRequest
from governance.models import (
    GpuFlavor,
    Pool,
    PreemptionClass,
    PriorityTier,
    Project,
    Terms,
    User,
)
from governance.services.demo import DEMO_REASON, demo_lock
from governance.services.demo.clock import clock_at, mails_discarded

from .policies import policy_create
from .requests import request_approve, request_create, request_reject
from .sync import requests_sync

# kind, tier slug (None: every other tier), days, who approves, approvers, monthly flag
POLICIES = [
    (RequestKind.PRIORITY_UPGRADE, None, 14, ApproverRule.TIER_OWNER, 1, 2),
    (RequestKind.PRIORITY_UPGRADE, "production", 7, ApproverRule.TIER_OWNER, 2, 1),
    (RequestKind.QUEUE_JUMP, None, 2, ApproverRule.TIER_OWNER, 1, 3),
    (RequestKind.QUEUE_JUMP, "production", 1, ApproverRule.TIER_OWNER, 2, 1),
    (RequestKind.QUOTA_EXCEPTION, None, 14, ApproverRule.OPS, 1, 2),
    (RequestKind.PREEMPTION_PROTECTION, None, 7, ApproverRule.OPS, 1, 2),
]


@dataclass(frozen=True)
class DemoRequest:
    project: str
    requester: str
    kind: str
    justification: str
    business_impact: str
    # Hours from now: when it was filed, and its requested start and end.
    filed: float
    starts: float
    ends: float
    fields: dict[str, Any] = field(default_factory=dict)
    deadline: float | None = None
    # Who decides, and how: ("approve" | "reject", username, comment), in order.
    decisions: tuple[tuple[str, str, str], ...] = ()


REQUESTS = [
    DemoRequest(
        "medical-imaging",
        "aisha.bello",
        RequestKind.PREEMPTION_PROTECTION,
        "The hospital validation run cannot checkpoint mid-epoch.",
        "A preempted run restarts from zero and misses the partner's review date.",
        filed=-24 * 40 - 0.5,
        starts=-24 * 40,
        ends=-24 * 37,
        fields={"preemption_class": "never-preempt"},
        decisions=(("approve", "ops", "Three days, no more."),),
    ),
    DemoRequest(
        "llm-pretrain",
        "raj.patel",
        RequestKind.QUOTA_EXCEPTION,
        "The 70B run needs 16 more H100 for the final annealing phase.",
        "Without them the release candidate slips by a week.",
        filed=-24 * 6 - 0.5,
        starts=-24 * 6,
        ends=20,
        fields={"pool": "training", "flavor": "h100-80g", "extra_gpus": 16},
        deadline=22,
        decisions=(("approve", "james.wilson", "Training H100 has idle capacity this week."),),
    ),
    DemoRequest(
        "robotics",
        "noah.schmidt",
        RequestKind.PRIORITY_UPGRADE,
        "The simulation benchmark for the board demo must finish by Friday.",
        "The demo to the board would show last quarter's policy.",
        filed=-50,
        starts=-48,
        ends=24 * 4,
        fields={"tier": "production"},
        decisions=(
            (
                "reject",
                "wei.zhang",
                "Simulation runs are not a production service. Ask for a quota exception "
                "on H100 instead; ops can approve that today.",
            ),
        ),
    ),
    DemoRequest(
        "speech",
        "fatima.khan",
        RequestKind.PRIORITY_UPGRADE,
        "The new recogniser must be retrained on the customer's accent data before launch.",
        "The launch with the telecom partner moves by two weeks if the retraining waits.",
        filed=-3,
        starts=12,
        ends=12 + 24 * 5,
        fields={"tier": "key-project"},
        deadline=24 * 6,
    ),
    DemoRequest(
        "search",
        "sara.lindqvist",
        RequestKind.QUEUE_JUMP,
        "Two evaluation jobs gate tonight's ranking release.",
        "The release train leaves at 22:00; the next one is in a week.",
        filed=-0.7,
        starts=0,
        ends=18,
        fields={"tier": "key-project", "job_ids": ["48213", "48214"]},
        deadline=10,
    ),
    DemoRequest(
        "vision",
        "lead",
        RequestKind.QUOTA_EXCEPTION,
        "The video model's ablations need 8 more A100 for ten days.",
        "The paper deadline is missed without the ablations.",
        filed=-1.5,
        starts=48,
        ends=48 + 24 * 10,
        fields={"pool": "training", "flavor": "a100-80g", "extra_gpus": 8},
        deadline=48 + 24 * 12,
    ),
]


def _policies_ensure(*, ops: User, tiers: dict[str, PriorityTier]) -> int:
    existing = set(ApprovalPolicy.objects.values_list("kind", "tier__slug"))
    created = 0
    for kind, tier_slug, days, approver, required, threshold in POLICIES:
        if (kind, tier_slug) in existing or (tier_slug and tier_slug not in tiers):
            continue
        policy_create(
            user=ops,
            reason=DEMO_REASON,
            kind=kind,
            tier=tiers[tier_slug] if tier_slug else None,
            max_duration_days=days,
            approver=approver,
            approvals_required=required,
            monthly_flag_threshold=threshold,
        )
        created += 1
    return created


def _fields(spec: DemoRequest) -> dict[str, Any]:
    values = dict(spec.fields)
    lookups: dict[str, type[PriorityTier | Pool | GpuFlavor | PreemptionClass]] = {
        "tier": PriorityTier,
        "pool": Pool,
        "flavor": GpuFlavor,
        "preemption_class": PreemptionClass,
    }
    for name, model in lookups.items():
        if name in values:
            values[name] = model._default_manager.get(slug=values[name])
    return values


def demo_approvals_seed(*, now: datetime | None = None) -> dict[str, int]:
    """Load the demo policies and requests; return how many of each were created."""
    with mails_discarded():
        return _seed(now=(now or timezone.now()).replace(second=0, microsecond=0))


@transaction.atomic
def _seed(*, now: datetime) -> dict[str, int]:
    demo_lock()  # runs started together load one after the other: the later adds nothing
    users = {user.username: user for user in User.objects.all()}
    projects = {project.slug: project for project in Project.objects.all()}
    tiers = {tier.slug: tier for tier in PriorityTier.objects.all()}
    if "ops" not in users or not projects:
        raise ValidationError(_("Load governance's demo data first (manage.py seed_demo)."))
    created: Counter[str] = Counter()
    with clock_at(now - timedelta(days=90)):
        created["policies"] = _policies_ensure(ops=users["ops"], tiers=tiers)

    def at(hours: float) -> datetime:
        return now + timedelta(hours=hours)

    for spec in REQUESTS:
        project = projects.get(spec.project)
        if project is None or spec.requester not in users:
            continue
        if UpgradeRequest.objects.filter(
            project=project, justification=spec.justification
        ).exists():
            continue
        with clock_at(at(spec.filed)):
            request = _file(spec, users=users, project=project, at=at)
        decided = at(spec.filed + 1)
        for decision, username, comment in spec.decisions:
            with clock_at(decided):
                request = _decide(
                    request, decision, user=users[username], comment=comment, now=decided
                )
            decided += timedelta(hours=1)
        created["requests"] += 1
    # Bring what the clock moved past up to date (the beat task does this every minute).
    requests_sync(now=now)
    return {kind: count for kind, count in created.items() if count}


def _file(
    spec: DemoRequest,
    *,
    users: dict[str, User],
    project: Project,
    at: Callable[[float], datetime],
) -> UpgradeRequest:
    return request_create(
        user=users[spec.requester],
        project=project,
        terms=Terms.from_data(
            {
                "kind": spec.kind,
                "starts_at": at(spec.starts),
                "ends_at": at(spec.ends),
                **_fields(spec),
            }
        ),
        justification=spec.justification,
        business_impact=spec.business_impact,
        deadline=at(spec.deadline) if spec.deadline is not None else None,
        submit=True,
        now=at(spec.filed),
    )


def _decide(
    request: UpgradeRequest, decision: str, *, user: User, comment: str, now: datetime
) -> UpgradeRequest:
    if decision == Decision.APPROVE:
        return request_approve(request=request, user=user, comment=comment, now=now)
    return request_reject(request=request, user=user, reason=comment, now=now)
