"""The vocabularies of a request: its kinds (the kinds of grant), stages, states (with the
state at an instant, ``state_at``), actions, approver rules and an approver's decisions;
``grant_summary`` says what a grant or a request changes in one line."""

from datetime import datetime
from typing import Any

from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from governance.models import (
    TIER_KINDS,
    GrantKind,
    grant_in_force,
)

# The kinds of request are the kinds of grant they become.
RequestKind = GrantKind


def grant_summary(grant: Any) -> str:
    """One line saying what a grant (or a request, which has the same fields) changes."""
    jobs = ", ".join(grant.job_ids) if grant.job_ids else ""
    if grant.kind in TIER_KINDS:
        if jobs:
            return gettext("jobs %(jobs)s at %(tier)s") % {"jobs": jobs, "tier": grant.tier}
        return gettext("the project at %(tier)s") % {"tier": grant.tier}
    if grant.kind == RequestKind.QUOTA_EXCEPTION:
        what = (
            gettext("borrow limit lifted")
            if grant.lift_borrow_limit
            else gettext("+%(gpus)d GPUs") % {"gpus": grant.extra_gpus or 0}
        )
        return gettext("%(what)s of %(flavor)s in %(pool)s") % {
            "what": what,
            "flavor": grant.flavor,
            "pool": grant.pool,
        }
    if jobs:
        return gettext("jobs %(jobs)s as %(class)s") % {
            "jobs": jobs,
            "class": grant.preemption_class,
        }
    return gettext("the project's work as %(class)s") % {"class": grant.preemption_class}


class RequestStage(models.TextChoices):
    """What people have done with a request (stored). Once approved, the grant tells the rest."""

    DRAFT = "draft", _("Draft")
    SUBMITTED = "submitted", _("Submitted")
    APPROVED = "approved", _("Approved")
    REJECTED = "rejected", _("Rejected")
    WITHDRAWN = "withdrawn", _("Withdrawn")


class RequestState(models.TextChoices):
    """A request's state at an instant: its stage, or once approved its grant's state then."""

    DRAFT = "draft", _("Draft")
    SUBMITTED = "submitted", _("Submitted")
    APPROVED = "approved", _("Approved")
    REJECTED = "rejected", _("Rejected")
    WITHDRAWN = "withdrawn", _("Withdrawn")
    ACTIVE = "active", _("Active")
    EXPIRED = "expired", _("Expired")
    REVOKED = "revoked", _("Revoked")


# States in which nothing more happens to a request.
FINAL_STATES = (
    RequestState.REJECTED,
    RequestState.WITHDRAWN,
    RequestState.EXPIRED,
    RequestState.REVOKED,
)
# How pages mark each state.
STATE_BADGES = {
    RequestState.SUBMITTED: "badge--warning",
    RequestState.APPROVED: "badge--lead",
    RequestState.ACTIVE: "badge--created",
    RequestState.REJECTED: "badge--danger",
    RequestState.REVOKED: "badge--danger",
}
# States of an approved request whose grant has not ended.
GRANTED_STATES = (RequestState.APPROVED, RequestState.ACTIVE)


def state_at(
    *,
    stage: str,
    starts_at: datetime | None,
    ends_at: datetime | None,
    revoked_at: datetime | None,
    at: datetime,
) -> RequestState:
    """The state of a request at ``at`` from its stage and its grant's time box.

    The one rule; ``UpgradeRequestQuerySet.state_q`` says the same in SQL.
    """
    if stage != RequestStage.APPROVED or starts_at is None or ends_at is None:
        return RequestState(stage)
    if revoked_at is not None and revoked_at <= at:
        return RequestState.REVOKED
    if ends_at <= at:
        return RequestState.EXPIRED
    if grant_in_force(starts_at=starts_at, ends_at=ends_at, revoked_at=revoked_at, at=at):
        return RequestState.ACTIVE
    return RequestState.APPROVED


class RequestAction(models.TextChoices):
    """What someone may do to a request; ``selectors.request_action_blocker`` says who when."""

    SUBMIT = "submit", _("Submit")
    WITHDRAW = "withdraw", _("Withdraw")
    APPROVE = "approve", _("Approve")
    REJECT = "reject", _("Reject")
    REVOKE = "revoke", _("Revoke")
    EXTEND = "extend", _("Extend")


class ApproverRule(models.TextChoices):
    TIER_OWNER = "tier_owner", _("The target tier's business owner")
    OPS = "ops", _("Ops")


class Decision(models.TextChoices):
    APPROVE = "approve", _("Approve")
    REJECT = "reject", _("Reject")
