"""``UpgradeRequest``: a priority upgrade or an urgent exception, and its queryset of states."""

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from governance.models import (
    Grant,
    GrantTerms,
    Project,
    grant_in_force_q,
)
from governance.models.texts import message_text

from .policies import ApprovalPolicy
from .vocabulary import (
    FINAL_STATES,
    STATE_BADGES,
    ApproverRule,
    Decision,
    RequestStage,
    RequestState,
    grant_summary,
    state_at,
)


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
