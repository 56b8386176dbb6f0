"""Priority tiers, preemption classes and tier review reminders."""

from datetime import date, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.urls import reverse
from django.utils.translation import gettext, gettext_noop
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from .changes import ChangeLinkedHistory


class PreemptionKind(models.TextChoices):
    ALLOWED = "allowed", _("Allowed")
    CAUTIOUS = "cautious", _("Cautious")
    FORBIDDEN = "forbidden", _("Forbidden")


class GrantEnd(models.TextChoices):
    """What happens to work admitted at a tier under a grant, once the grant ends."""

    KEEP = "keep", _("keeps running at the granted tier")
    LOWER = "lower", _("is lowered to the project's own tier")
    PREEMPT = "preempt", _("is lowered below every tier: preempted first at the next reclaim")


class PriorityTier(models.Model):
    slug = models.SlugField(_("slug"), max_length=63, unique=True)
    name = models.CharField(_("name"), max_length=100)
    score = models.PositiveSmallIntegerField(
        _("score"),
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text=_("1–100; orders the tiers. Higher runs first."),
    )
    scheduler_value = models.PositiveIntegerField(
        _("scheduler value"),
        help_text=_(
            "The number written to the scheduler (Slurm QOS Priority, Kueue "
            "WorkloadPriorityClass value)."
        ),
    )
    description = models.TextField(_("description"), blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("business owner"),
        on_delete=models.PROTECT,
        related_name="owned_tiers",
    )
    eligibility = models.TextField(
        _("who may use it"), help_text=_("The application conditions: which work qualifies.")
    )
    confirmed_by = models.CharField(
        _("who confirms"), max_length=200, help_text=_("Who confirms that work qualifies.")
    )
    max_gpus_per_job = models.PositiveIntegerField(
        _("GPU cap per job"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_("Empty means no cap."),
    )
    max_gpus_total = models.PositiveIntegerField(
        _("GPU cap for the whole tier"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_("Empty means no cap."),
    )
    may_preempt = models.BooleanField(_("may preempt"), default=False)
    preemptible_tiers = models.ManyToManyField(
        "self",
        verbose_name=_("tiers it may preempt"),
        symmetrical=False,
        blank=True,
        related_name="preempted_by",
    )
    aging_after_minutes = models.PositiveIntegerField(
        _("aging starts after (minutes)"),
        null=True,
        blank=True,
        help_text=_("Wait after which a pending job is raised. Empty means no aging."),
    )
    aging_step = models.PositiveSmallIntegerField(
        _("aging step (score points)"), null=True, blank=True
    )
    aging_cap = models.ForeignKey(
        "self",
        verbose_name=_("aging cap"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text=_("The highest tier aging may raise a job to. Never a tier that may preempt."),
    )
    after_grant = models.CharField(
        _("when a grant of it ends"),
        max_length=16,
        choices=GrantEnd.choices,
        default=GrantEnd.KEEP,
        help_text=_(
            "What happens to work admitted at this tier under a grant once the grant ends "
            "(applied by Arbiter on Kueue clusters)."
        ),
    )
    review_cycle_days = models.PositiveIntegerField(
        _("review cycle (days)"), validators=[MinValueValidator(1)]
    )
    wait_alert_minutes = models.PositiveIntegerField(
        _("wait alert after (minutes)"),
        null=True,
        blank=True,
        help_text=_(
            "A job of this tier waiting longer raises an alert to the tier owner and ops. "
            "Empty means no alert; tiers that may preempt start at 10 minutes."
        ),
    )
    last_reviewed_on = models.DateField(_("last reviewed on"), null=True, blank=True)
    next_review_on = models.DateField(_("next review due"), null=True, blank=True)
    is_default = models.BooleanField(_("default tier"), default=False)
    retired_on = models.DateField(
        _("retired on"),
        null=True,
        blank=True,
        help_text=_("A retired tier is kept for the record; no work may use it."),
    )
    history = HistoricalRecords(m2m_fields=[preemptible_tiers], bases=[ChangeLinkedHistory])

    class Meta:
        ordering = ["-score", "name"]
        verbose_name = _("priority tier")
        verbose_name_plural = _("priority tiers")
        constraints = [
            models.CheckConstraint(
                condition=Q(score__gte=1, score__lte=100), name="tier_score_1_100"
            ),
            models.CheckConstraint(
                condition=Q(review_cycle_days__gt=0), name="tier_review_cycle_positive"
            ),
            models.UniqueConstraint(
                fields=["is_default"], condition=Q(is_default=True), name="tier_one_default"
            ),
            models.UniqueConstraint(fields=["score"], name="tier_score_unique"),
            models.CheckConstraint(
                condition=(
                    Q(aging_after_minutes__isnull=True)
                    | Q(aging_step__gt=0, aging_cap__isnull=False)
                ),
                name="tier_aging_complete",
            ),
            models.CheckConstraint(condition=~Q(aging_cap=F("id")), name="tier_aging_cap_other"),
            models.CheckConstraint(
                condition=Q(after_grant__in=GrantEnd.values), name="tier_after_grant_valid"
            ),
            models.CheckConstraint(
                condition=Q(max_gpus_per_job__isnull=True) | Q(max_gpus_per_job__gt=0),
                name="tier_job_cap_positive",
            ),
            models.CheckConstraint(
                condition=Q(max_gpus_total__isnull=True) | Q(max_gpus_total__gt=0),
                name="tier_total_cap_positive",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("tier_detail", args=[self.slug])

    def review_due_from(self, reviewed_on: date) -> date:
        return reviewed_on + timedelta(days=self.review_cycle_days)

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.aging_after_minutes is not None:
            if not self.aging_step:
                errors["aging_step"] = gettext("Aging needs a step greater than 0.")
            if self.aging_cap_id is None:
                errors["aging_cap"] = gettext("Aging needs a cap: the highest tier it may reach.")
        elif self.aging_step or self.aging_cap_id:
            errors["aging_after_minutes"] = gettext(
                "Set when aging starts, or clear the aging step and cap."
            )
        if self.aging_cap_id is not None and self.aging_cap_id == self.pk:
            errors["aging_cap"] = gettext(
                "The aging cap must be a higher tier, not the tier itself."
            )
        if errors:
            raise ValidationError(errors)


# The usual names of preemption classes (the demo's among them): a class named so reads in
# the reader's language wherever its name is shown (the ``stored`` filter); a name someone
# typed otherwise is shown as typed.
USUAL_CLASS_NAMES = [
    gettext_noop("Preemptible"),
    gettext_noop("Cautious"),
    gettext_noop("Never preempt"),
]


class PreemptionClass(models.Model):
    slug = models.SlugField(_("slug"), max_length=63, unique=True)
    name = models.CharField(_("name"), max_length=100)
    kind = models.CharField(_("kind"), max_length=16, choices=PreemptionKind.choices)
    requires_verified_checkpoint = models.BooleanField(
        _("requires a verified checkpoint"), default=False
    )
    max_checkpoint_interval_minutes = models.PositiveIntegerField(
        _("maximum checkpoint interval (minutes)"), null=True, blank=True
    )
    min_runtime_minutes = models.PositiveIntegerField(
        _("minimum runtime before preemption (minutes)"), null=True, blank=True
    )
    max_preemptions_per_day = models.PositiveIntegerField(
        _("maximum preemptions per day"), null=True, blank=True
    )
    recovery_owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("recovery owner"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    business_impact = models.TextField(_("business impact"))
    history = HistoricalRecords(bases=[ChangeLinkedHistory])

    class Meta:
        ordering = ["name"]
        verbose_name = _("preemption class")
        verbose_name_plural = _("preemption classes")
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=PreemptionKind.values), name="preemption_kind_valid"
            ),
            models.CheckConstraint(
                condition=~Q(kind=PreemptionKind.FORBIDDEN)
                | Q(max_preemptions_per_day__isnull=True)
                | Q(max_preemptions_per_day=0),
                name="preemption_forbidden_never",
            ),
            models.CheckConstraint(
                condition=Q(requires_verified_checkpoint=False)
                | Q(max_checkpoint_interval_minutes__gt=0),
                name="preemption_checkpoint_interval",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("preemption_class_detail", args=[self.slug])

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.kind == PreemptionKind.FORBIDDEN and self.max_preemptions_per_day:
            errors["max_preemptions_per_day"] = gettext(
                "A forbidden class is never preempted: leave the daily maximum empty or 0 "
                "(it is %(value)d)."
            ) % {"value": self.max_preemptions_per_day}
        if self.requires_verified_checkpoint and not self.max_checkpoint_interval_minutes:
            errors["max_checkpoint_interval_minutes"] = gettext(
                "A class that requires verified checkpoints needs a maximum checkpoint interval."
            )
        if errors:
            raise ValidationError(errors)


class ReminderKind(models.TextChoices):
    DUE_SOON = "due_soon", _("Due soon")
    OVERDUE = "overdue", _("Overdue")


class ReviewReminder(models.Model):
    """A reminder mailed to a tier's owner (or a quota's project leads); one per subject,
    kind, due date and recipient, never two."""

    tier = models.ForeignKey(
        PriorityTier,
        verbose_name=_("tier"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="reminders",
    )
    quota = models.ForeignKey(
        "Quota",
        verbose_name=_("quota"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="reminders",
    )
    kind = models.CharField(_("kind"), max_length=16, choices=ReminderKind.choices)
    due_on = models.DateField(_("review due on"))
    recipient = models.EmailField(_("recipient"))
    sent_at = models.DateTimeField(_("sent at"), auto_now_add=True)

    class Meta:
        ordering = ["-sent_at"]
        verbose_name = _("review reminder")
        verbose_name_plural = _("review reminders")
        constraints = [
            models.UniqueConstraint(
                fields=["tier", "kind", "due_on"], name="reminder_once_per_due_date"
            ),
            models.UniqueConstraint(
                fields=["quota", "kind", "due_on", "recipient"],
                condition=Q(quota__isnull=False),
                name="reminder_quota_once_per_due_date",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=ReminderKind.values), name="reminder_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(tier__isnull=False, quota__isnull=True)
                | Q(tier__isnull=True, quota__isnull=False),
                name="reminder_one_subject",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.tier or self.quota} ({self.due_on})"
