"""The checks a request passes before it is saved or submitted: its kind's fields and the
policy's time box. Each raises ``ValidationError`` naming the field and the numbers."""

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from approvals import selectors
from approvals.models import TIER_KINDS, ApprovalPolicy, RequestKind, UpgradeRequest
from governance.models import PreemptionClass, PreemptionKind, Quota
from governance.selectors import effective_rules
from governance.selectors.effective import STRICTNESS

MAX_JOB_IDS = 100


def clean_job_ids(job_ids: list[Any] | None) -> list[str]:
    if job_ids is None:
        return []
    if not isinstance(job_ids, list) or not all(
        isinstance(job, str) and job.strip() for job in job_ids
    ):
        raise ValidationError({"job_ids": _("Job ids must be a list of non-empty strings.")})
    cleaned = list(dict.fromkeys(job.strip() for job in job_ids))
    if len(cleaned) > MAX_JOB_IDS:
        raise ValidationError(
            {
                "job_ids": _("Name at most %(limit)d jobs (there are %(count)d).")
                % {"limit": MAX_JOB_IDS, "count": len(cleaned)}
            }
        )
    return cleaned


def check_kind_fields(request: UpgradeRequest, *, now: datetime) -> None:
    """The terms on their own (``GrantTerms.terms_errors``: the fields each kind needs and
    uses), then against the project's rules in force at ``now``."""
    errors = request.terms_errors()
    kind = request.kind
    if kind in TIER_KINDS and request.tier is not None and "tier" not in errors:
        rules = effective_rules(at=now, project_slugs=[request.project.slug])
        base = rules.projects[request.project.slug].tier
        if base is not None and request.tier.score <= base.score:
            errors["tier"] = _(
                "%(project)s already runs at %(current)s (score %(score)d): ask for a higher tier."
            ) % {"project": request.project, "current": base, "score": base.score}
    if (
        kind == RequestKind.QUOTA_EXCEPTION
        and "pool" not in errors
        and not Quota.objects.filter(
            project=request.project, pool=request.pool, flavor=request.flavor
        ).exists()
    ):
        errors["pool"] = _(
            "%(project)s has no quota of %(flavor)s in %(pool)s to raise: ask ops for a "
            "quota instead."
        ) % {"project": request.project, "flavor": request.flavor, "pool": request.pool}
    chosen = request.preemption_class
    if kind == RequestKind.PREEMPTION_PROTECTION and chosen is not None:
        if chosen.kind == PreemptionKind.ALLOWED:
            errors["preemption_class"] = _(
                "“%(class)s” allows preemption: choose a cautious or forbidden class."
            ) % {"class": chosen}
        else:
            classes = list(
                PreemptionClass.objects.filter(quotas__project=request.project).distinct()
            )
            if classes and all(
                STRICTNESS[PreemptionKind(current.kind)] >= STRICTNESS[PreemptionKind(chosen.kind)]
                for current in classes
            ):
                errors["preemption_class"] = _(
                    "%(project)s's work is already at least as protected as “%(class)s”."
                ) % {"project": request.project, "class": chosen}
    if errors:
        raise ValidationError(errors)


def policy_of(request: UpgradeRequest) -> ApprovalPolicy:
    tier = selectors.policy_tier(kind=request.kind, project=request.project, tier=request.tier)
    policy = selectors.policy_for(kind=request.kind, tier=tier)
    if policy is None:
        raise ValidationError(
            _("No approval policy covers a %(kind)s at %(tier)s yet: ask ops to add one.")
            % {"kind": request.get_kind_display().lower(), "tier": tier or _("any tier")}
        )
    return policy


def check_time_box(request: UpgradeRequest, policy: ApprovalPolicy, *, now: datetime) -> None:
    if request.ends_at <= request.starts_at:
        raise ValidationError({"ends_at": _("The end must come after the start.")})
    if request.ends_at <= now:
        raise ValidationError({"ends_at": _("This period has already ended.")})
    limit = policy.max_duration_days
    duration = request.ends_at - request.starts_at
    if duration.total_seconds() > limit * 86400:
        raise ValidationError(
            {
                "ends_at": _(
                    "At most %(limit)d days for a %(kind)s at %(tier)s (the policy's limit); "
                    "this asks for %(days).1f days."
                )
                % {
                    "limit": limit,
                    "kind": request.get_kind_display().lower(),
                    "tier": policy.tier or _("this tier"),
                    "days": duration.total_seconds() / 86400,
                }
            }
        )
    if request.deadline is not None and request.deadline <= request.starts_at:
        raise ValidationError({"deadline": _("The deadline must come after the start.")})
