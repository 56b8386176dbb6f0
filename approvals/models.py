"""Requests for priority upgrades and urgent exceptions, their approvals and notifications.

A request is filed by a project lead (or a project's CI pipeline), carries its evidence and
a time box, and is decided by the approvers its ``ApprovalPolicy`` names. An approved
request becomes a ``governance.Grant``; from then on the request's state follows the grant's
(scheduled → active → expired / revoked). Every write goes through ``approvals.services``.
"""

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from governance.models import (
    TIER_KINDS,
    Grant,
    GrantKind,
    GrantTerms,
    PriorityTier,
    Project,
    grant_in_force,
    grant_in_force_q,
)
from governance.models.changes import ChangeLinkedHistory
from governance.models.texts import message_text

# The kinds of request are the kinds of grant they become.
RequestKind = GrantKind

__all__ = ["TIER_KINDS"]


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


class UpgradeRequestQuerySet(models.QuerySet["UpgradeRequest"]):
    @staticmethod
    def state_q(state: str, *, at: datetime) -> Q:
        """The requests in ``state`` at ``at`` (as ``state_at`` decides, in SQL)."""
        if state not in (
            RequestState.APPROVED,
            RequestState.ACTIVE,
            RequestState.EXPIRED,
            RequestState.REVOKED,
        ):
            return Q(stage=state)
        granted = Q(stage=RequestStage.APPROVED, grant__isnull=False)
        revoked = Q(grant__revoked_at__lte=at)
        if state == RequestState.REVOKED:
            return granted & revoked
        if state == RequestState.EXPIRED:
            return granted & ~revoked & Q(grant__ends_at__lte=at)
        if state == RequestState.ACTIVE:
            return granted & grant_in_force_q(at, through="grant__")
        return granted & ~revoked & Q(grant__starts_at__gt=at)

    def in_state(self, *states: str, at: datetime | None = None) -> "UpgradeRequestQuerySet":
        at = at or timezone.now()
        condition = Q(pk__in=[])
        for state in states:
            condition |= self.state_q(state, at=at)
        return self.filter(condition)


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


class ApprovalPolicy(models.Model):
    """How one kind of request is decided, for one tier (or for every tier without its own).

    For priority upgrades and queue jumps the tier is the target tier; for quota exceptions
    and preemption protection it is the project's tier.
    """

    kind = models.CharField(_("kind"), max_length=32, choices=RequestKind.choices)
    tier = models.ForeignKey(
        PriorityTier,
        verbose_name=_("tier"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="approval_policies",
        help_text=_("Empty: every tier that has no policy of its own for this kind."),
    )
    max_duration_days = models.PositiveSmallIntegerField(
        _("maximum duration (days)"),
        validators=[MinValueValidator(1), MaxValueValidator(365)],
        help_text=_("The longest time box a request may ask for."),
    )
    approver = models.CharField(
        _("who approves"), max_length=16, choices=ApproverRule.choices, default=ApproverRule.OPS
    )
    approvals_required = models.PositiveSmallIntegerField(
        _("distinct approvers required"),
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(3)],
        help_text=_(
            "With the tier owner as approver, the owner is always one of them; the others are ops."
        ),
    )
    monthly_flag_threshold = models.PositiveSmallIntegerField(
        _("flag after (approved exceptions per month)"),
        help_text=_(
            "A request is flagged when its project already had this many approved exceptions "
            "in the calendar month."
        ),
    )
    # A governed rule kind (``services.policies.policy_rule_kind``): each history row may
    # name the rule change that wrote it.
    history = HistoricalRecords(bases=[ChangeLinkedHistory])

    class Meta:
        ordering = ["kind", "tier__score", "pk"]
        verbose_name = _("approval policy")
        verbose_name_plural = _("approval policies")
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=RequestKind.values), name="policy_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(approver__in=ApproverRule.values), name="policy_approver_valid"
            ),
            models.CheckConstraint(
                condition=Q(max_duration_days__gte=1, max_duration_days__lte=365),
                name="policy_duration_1_365",
            ),
            models.CheckConstraint(
                condition=Q(approvals_required__gte=1, approvals_required__lte=3),
                name="policy_approvals_1_3",
            ),
            models.UniqueConstraint(fields=["kind", "tier"], name="policy_unique_kind_tier"),
            models.UniqueConstraint(
                fields=["kind"], condition=Q(tier__isnull=True), name="policy_unique_kind_default"
            ),
        ]

    def __str__(self) -> str:
        tier = self.tier.name if self.tier is not None else _("every other tier")
        return f"{self.get_kind_display()} · {tier}"

    def get_absolute_url(self) -> str:
        return reverse("approval_policy_list") + f"#policy-{self.pk}"

    @property
    def needs_tier_owner(self) -> bool:
        return self.approver == ApproverRule.TIER_OWNER


class UpgradeRequest(GrantTerms):
    """A priority upgrade or an urgent exception asked for by a lead or a CI pipeline.

    Its terms (kind, what it changes, its time box) are a grant's (``GrantTerms``). Its
    ``stage`` records what people did with it; once approved, its ``state`` at an instant
    follows its grant's time box and revocation (``state_at``): nothing copies it.
    """

    stage = models.CharField(
        _("stage"), max_length=16, choices=RequestStage.choices, default=RequestStage.DRAFT
    )
    project = models.ForeignKey(
        Project, verbose_name=_("project"), on_delete=models.PROTECT, related_name="requests"
    )
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("requester"),
        on_delete=models.PROTECT,
        related_name="upgrade_requests",
    )
    justification = models.TextField(_("justification"))
    business_impact = models.TextField(
        _("business impact"), help_text=_("What happens if the request is refused.")
    )
    deadline = models.DateTimeField(
        _("deadline"),
        null=True,
        blank=True,
        help_text=_("When the work must be done, if there is a date it cannot miss."),
    )
    extends = models.ForeignKey(
        "self",
        verbose_name=_("extends"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="extensions",
        help_text=_("The request this one extends."),
    )
    # Fixed when the request is submitted: the policy, who decides, the evidence.
    policy = models.ForeignKey(
        ApprovalPolicy,
        verbose_name=_("policy"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="requests",
    )
    approver_rule = models.CharField(
        _("who approves"), max_length=16, choices=ApproverRule.choices, blank=True
    )
    owner_approver = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("business owner who approves"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    approvals_required = models.PositiveSmallIntegerField(
        _("distinct approvers required"), default=1
    )
    flagged = models.BooleanField(_("flagged"), default=False)
    flag_reason = models.CharField(_("why flagged"), max_length=300, blank=True)
    # The same, as a message shown in the reader's language (``display_flag_reason``).
    flag_message = models.JSONField(
        _("why flagged (message)"), null=True, blank=True, editable=False
    )
    evidence = models.JSONField(_("evidence"), default=dict, blank=True)
    grant = models.OneToOneField(
        Grant,
        verbose_name=_("grant"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="request",
    )
    created_at = models.DateTimeField(_("created at"))
    submitted_at = models.DateTimeField(_("submitted at"), null=True, blank=True)
    # Who sent it to its approvers: the requester, or ops submitting someone's draft (who
    # then counts as one of its authors for four eyes: they do not decide it).
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("submitted by"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    decided_at = models.DateTimeField(_("decided at"), null=True, blank=True)
    history = HistoricalRecords()

    objects = UpgradeRequestQuerySet.as_manager()

    class Meta(GrantTerms.Meta):
        ordering = ["-created_at", "-pk"]
        verbose_name = _("request")
        verbose_name_plural = _("requests")
        indexes = [
            models.Index(fields=["stage", "submitted_at"], name="request_stage_age"),
            # The lists, newest first: a page walks the index instead of sorting every row.
            models.Index(fields=["-created_at", "-id"], name="request_newest"),
        ]
        constraints = [
            *GrantTerms.Meta.constraints,
            models.CheckConstraint(
                condition=Q(stage__in=RequestStage.values), name="request_stage_valid"
            ),
            # An approved request has its grant, and only an approved one has one.
            models.CheckConstraint(
                condition=Q(stage=RequestStage.APPROVED, grant__isnull=False)
                | (~Q(stage=RequestStage.APPROVED) & Q(grant__isnull=True)),
                name="request_approved_has_grant",
            ),
            models.CheckConstraint(
                condition=Q(approvals_required__gte=1, approvals_required__lte=3),
                name="request_approvals_1_3",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.get_kind_display()} · {self.project}"

    def get_absolute_url(self) -> str:
        return reverse("request_detail", args=[self.pk])

    @property
    def duration(self) -> timedelta:
        return self.ends_at - self.starts_at

    @property
    def summary(self) -> str:
        return grant_summary(self)

    @property
    def display_flag_reason(self) -> str:
        """Why the request is flagged, in the reader's language."""
        return message_text(self.flag_message, self.flag_reason)

    @property
    def approvals_given(self) -> int:
        """Approvals so far (reads ``approvals``, which the list selectors prefetch)."""
        return sum(1 for approval in self.approvals.all() if approval.decision == Decision.APPROVE)

    @property
    def evidence_exceptions(self) -> list[dict[str, Any]]:
        """The evidence's past exceptions, with their instants as datetimes (for pages)."""
        return [
            {
                **item,
                "starts_at": parse_datetime(item["starts_at"]),
                "ends_at": parse_datetime(item["ends_at"]),
            }
            for item in (self.evidence or {}).get("recent_exceptions", [])
        ]

    def state_at(self, at: datetime) -> RequestState:
        """The state at ``at`` (reads ``grant``, which the selectors join)."""
        grant = self.grant if self.grant_id else None
        return state_at(
            stage=self.stage,
            starts_at=grant.starts_at if grant else None,
            ends_at=grant.ends_at if grant else None,
            revoked_at=grant.revoked_at if grant else None,
            at=at,
        )

    @property
    def state(self) -> RequestState:
        """The state now."""
        return self.state_at(timezone.now())

    def get_state_display(self) -> str:
        return str(self.state.label)

    @property
    def state_badge(self) -> str:
        """The badge style of the state now (for pages)."""
        return STATE_BADGES.get(self.state, "")

    @property
    def is_pending(self) -> bool:
        return self.stage == RequestStage.SUBMITTED

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES


class EventAction(models.TextChoices):
    CREATED = "created", _("Created")
    SUBMITTED = "submitted", _("Submitted")
    APPROVAL = "approval", _("Approved by one approver")
    APPROVED = "approved", _("Approved")
    REJECTED = "rejected", _("Rejected")
    WITHDRAWN = "withdrawn", _("Withdrawn")
    ACTIVATED = "activated", _("Grant started")
    EXPIRED = "expired", _("Grant ended")
    REVOKED = "revoked", _("Revoked")
    EXTENDED = "extended", _("Extension requested")


class RequestEvent(models.Model):
    """One step of a request's timeline: who did what, when, and what they said."""

    request = models.ForeignKey(
        UpgradeRequest, verbose_name=_("request"), on_delete=models.CASCADE, related_name="events"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("by"), on_delete=models.PROTECT, related_name="+"
    )
    action = models.CharField(_("action"), max_length=16, choices=EventAction.choices)
    comment = models.TextField(_("comment"), blank=True)
    # A comment Arbiter wrote, as a message shown in the reader's language.
    message = models.JSONField(_("message"), null=True, blank=True, editable=False)
    at = models.DateTimeField(_("at"))

    class Meta:
        ordering = ["at", "pk"]
        verbose_name = _("request event")
        verbose_name_plural = _("request events")
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=EventAction.values), name="event_action_valid"
            ),
            # Rejecting, withdrawing... a grant starts or ends once: never two such rows.
            models.UniqueConstraint(
                fields=["request", "action"],
                condition=Q(
                    action__in=[
                        EventAction.SUBMITTED,
                        EventAction.APPROVED,
                        EventAction.REJECTED,
                        EventAction.WITHDRAWN,
                        EventAction.ACTIVATED,
                        EventAction.EXPIRED,
                        EventAction.REVOKED,
                    ]
                ),
                name="event_once_per_request",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.request_id}: {self.get_action_display()} by {self.actor}"

    @property
    def display_comment(self) -> str:
        """The comment: what someone typed, or Arbiter's own in the reader's language."""
        return message_text(self.message, self.comment)


class Decision(models.TextChoices):
    APPROVE = "approve", _("Approve")
    REJECT = "reject", _("Reject")


class Approval(models.Model):
    """One approver's decision on one request. Nobody decides a request twice."""

    request = models.ForeignKey(
        UpgradeRequest,
        verbose_name=_("request"),
        on_delete=models.CASCADE,
        related_name="approvals",
    )
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("approver"),
        on_delete=models.PROTECT,
        related_name="approvals",
    )
    decision = models.CharField(_("decision"), max_length=16, choices=Decision.choices)
    comment = models.TextField(_("comment"), blank=True)
    at = models.DateTimeField(_("at"))

    class Meta:
        ordering = ["at", "pk"]
        verbose_name = _("approval")
        verbose_name_plural = _("approvals")
        constraints = [
            models.UniqueConstraint(
                fields=["request", "approver"], name="approval_once_per_approver"
            ),
            models.CheckConstraint(
                condition=Q(decision__in=Decision.values), name="approval_decision_valid"
            ),
            models.CheckConstraint(
                condition=~Q(decision=Decision.REJECT) | ~Q(comment=""),
                name="approval_rejection_has_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.request_id}: {self.get_decision_display()} by {self.approver}"

    @property
    def is_approval(self) -> bool:
        return self.decision == Decision.APPROVE


class NotificationEvent(models.TextChoices):
    SUBMITTED = "submitted", _("Waiting for your decision")
    APPROVAL = "approval", _("Approval recorded")
    APPROVED = "approved", _("Approved")
    REJECTED = "rejected", _("Rejected")
    WITHDRAWN = "withdrawn", _("Withdrawn")
    ACTIVATED = "activated", _("Grant started")
    ENDING_SOON = "ending_soon", _("Grant ends within a day")
    EXPIRED = "expired", _("Grant ended")
    REVOKED = "revoked", _("Revoked")


class Notification(models.Model):
    """A message to one person, shown in the portal (and mailed when it was created)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="notifications",
    )
    request = models.ForeignKey(
        UpgradeRequest,
        verbose_name=_("request"),
        on_delete=models.CASCADE,
        related_name="notifications",
    )
    event = models.CharField(_("event"), max_length=16, choices=NotificationEvent.choices)
    # The text in English, as it was mailed to English readers; rows written before
    # ``message`` existed have only this (in their writer's language).
    text = models.CharField(_("text"), max_length=500)
    # The message id and its parameters: the text in the reader's language (``body``).
    message = models.JSONField(_("message"), null=True, blank=True, editable=False)
    link = models.CharField(_("link"), max_length=300)
    created_at = models.DateTimeField(_("created at"))
    read_at = models.DateTimeField(_("read at"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = _("notification")
        verbose_name_plural = _("notifications")
        indexes = [models.Index(fields=["user", "read_at"], name="notification_unread")]
        constraints = [
            models.CheckConstraint(
                condition=Q(event__in=NotificationEvent.values), name="notification_event_valid"
            ),
            # The expiry reminders go out once per person and request, however often the
            # beat task runs: this constraint is what makes a second run send nothing.
            models.UniqueConstraint(
                fields=["user", "request", "event"],
                condition=Q(event__in=[NotificationEvent.ENDING_SOON, NotificationEvent.EXPIRED]),
                name="notification_expiry_once",
            ),
        ]

    def __str__(self) -> str:
        return self.body

    @property
    def body(self) -> str:
        """The text in the active language."""
        return message_text(self.message, self.text)


class IdempotencyKey(models.Model):
    """A client's ``Idempotency-Key`` for a write through the API, and the answer it got.

    A retried call with the same key (same principal) and the same body gets the stored
    answer and does nothing again; the same key with another body is refused. The unique
    constraint is what makes two concurrent retries safe: the second insert waits for the
    first transaction and then finds its row. Keys expire after
    ``ARBITER_IDEMPOTENCY_KEY_HOURS``.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="idempotency_keys",
    )
    key = models.CharField(_("key"), max_length=255)
    operation = models.CharField(_("operation"), max_length=100)
    fingerprint = models.CharField(
        _("fingerprint"), max_length=64, help_text=_("SHA-256 of the operation and its body.")
    )
    # Empty only inside the transaction that runs the call (never committed so).
    response_status = models.PositiveSmallIntegerField(_("response status"), null=True, blank=True)
    response_body = models.JSONField(
        _("response body"), encoder=DjangoJSONEncoder, null=True, blank=True
    )
    created_at = models.DateTimeField(_("created at"))
    expires_at = models.DateTimeField(_("expires at"))

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = _("idempotency key")
        verbose_name_plural = _("idempotency keys")
        indexes = [models.Index(fields=["expires_at"], name="idempotency_key_expiry")]
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_per_user"),
            models.CheckConstraint(
                condition=Q(expires_at__gt=models.F("created_at")),
                name="idempotency_key_expires_after_creation",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.key}"
