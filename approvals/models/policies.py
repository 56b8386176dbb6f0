"""``ApprovalPolicy``: how one kind of request is decided, for one tier or for every tier."""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from governance.models import PriorityTier
from governance.models.changes import ChangeLinkedHistory

from .vocabulary import ApproverRule, RequestKind


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
