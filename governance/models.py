"""The governed rules of the GPU pool.

Every governed model keeps its history (django-simple-history); services set the user and
the reason of each history row. Invariants that fit one row are database constraints; the
ones that span rows (capacity vs guarantees, aging caps, pool hierarchy) live in the
services, under ``select_for_update``.
"""

import re
from datetime import date, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

# Kubernetes label keys: an optional DNS prefix and a name of at most 63 characters.
LABEL_KEY_RE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


class SiteRole(models.TextChoices):
    OPS = "ops", _("Ops")
    APPROVER = "approver", _("Approver")
    MEMBER = "member", _("Member")


class ProjectRole(models.TextChoices):
    LEAD = "lead", _("Lead")
    MEMBER = "member", _("Member")


class PreemptionKind(models.TextChoices):
    ALLOWED = "allowed", _("Allowed")
    CAUTIOUS = "cautious", _("Cautious")
    FORBIDDEN = "forbidden", _("Forbidden")


class TaintEffect(models.TextChoices):
    NO_SCHEDULE = "NoSchedule", "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule", "PreferNoSchedule"
    NO_EXECUTE = "NoExecute", "NoExecute"


class User(AbstractUser):
    """A person or a service account. ``site_role`` decides what they may do site-wide."""

    site_role = models.CharField(
        _("site role"), max_length=16, choices=SiteRole.choices, default=SiteRole.MEMBER
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(site_role__in=SiteRole.values), name="user_site_role_valid"
            )
        ]

    @property
    def is_ops(self) -> bool:
        return self.is_active and (self.site_role == SiteRole.OPS or self.is_superuser)

    @property
    def is_approver(self) -> bool:
        return self.is_active and self.site_role == SiteRole.APPROVER

    def __str__(self) -> str:
        return self.get_full_name() or self.username


class Project(models.Model):
    slug = models.SlugField(_("slug"), max_length=63, unique=True)
    name = models.CharField(_("name"), max_length=200)
    description = models.TextField(_("description"), blank=True)
    tier = models.ForeignKey(
        "PriorityTier",
        verbose_name=_("tier"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="projects",
        help_text=_("The highest tier the project's work may use. Empty means the default tier."),
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="projects"
    )
    history = HistoricalRecords()

    class Meta:
        ordering = ["name"]
        verbose_name = _("project")
        verbose_name_plural = _("projects")

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("project_detail", args=[self.slug])


class Membership(models.Model):
    project = models.ForeignKey(
        Project, verbose_name=_("project"), on_delete=models.CASCADE, related_name="memberships"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="memberships",
    )
    role = models.CharField(
        _("role"), max_length=16, choices=ProjectRole.choices, default=ProjectRole.MEMBER
    )
    history = HistoricalRecords()

    class Meta:
        ordering = ["project__name", "role", "user__username"]
        verbose_name = _("membership")
        verbose_name_plural = _("memberships")
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique_user"),
            models.CheckConstraint(
                condition=Q(role__in=ProjectRole.values), name="membership_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.get_role_display()}) in {self.project}"


class GpuFlavor(models.Model):
    """A kind of GPU: what a Kueue ResourceFlavor and a Slurm typed GRES need."""

    slug = models.SlugField(_("slug"), max_length=63, unique=True)
    name = models.CharField(_("name"), max_length=100)
    gpu_model = models.CharField(_("GPU model"), max_length=100)
    memory_gb = models.PositiveIntegerField(_("memory (GB)"))
    gres_type = models.SlugField(
        _("Slurm GRES type"),
        max_length=63,
        blank=True,
        help_text=_("The type in gres/gpu:<type>; empty for untyped GPUs."),
    )
    node_labels = models.JSONField(
        _("node labels"),
        default=dict,
        blank=True,
        help_text=_('Labels that select the nodes, e.g. {"gpu.example.com/model": "a100"}.'),
    )
    node_taints = models.JSONField(
        _("node taints"),
        default=list,
        blank=True,
        help_text=_(
            'Taints on the nodes, e.g. [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}].'
        ),
    )
    history = HistoricalRecords()

    class Meta:
        ordering = ["name"]
        verbose_name = _("GPU flavor")
        verbose_name_plural = _("GPU flavors")
        constraints = [
            models.CheckConstraint(condition=Q(memory_gb__gt=0), name="flavor_memory_positive"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("flavor_detail", args=[self.slug])

    def clean(self) -> None:
        errors: dict[str, list[str]] = {}
        if not isinstance(self.node_labels, dict):
            errors["node_labels"] = [gettext('Node labels must be an object: {"key": "value"}.')]
        else:
            for key, value in self.node_labels.items():
                if (
                    not LABEL_KEY_RE.match(str(key))
                    or not isinstance(value, str)
                    or not (LABEL_VALUE_RE.match(value))
                ):
                    errors.setdefault("node_labels", []).append(
                        gettext("“%(key)s: %(value)s” is not a valid Kubernetes label.")
                        % {"key": key, "value": value}
                    )
        if not isinstance(self.node_taints, list):
            errors["node_taints"] = [gettext("Node taints must be a list of objects.")]
        else:
            for taint in self.node_taints:
                if (
                    not isinstance(taint, dict)
                    or not LABEL_KEY_RE.match(str(taint.get("key", "")))
                    or taint.get("effect") not in TaintEffect.values
                    or not LABEL_VALUE_RE.match(str(taint.get("value", "")))
                    or set(taint) - {"key", "value", "effect"}
                ):
                    errors.setdefault("node_taints", []).append(
                        gettext(
                            "%(taint)s is not a valid taint: it needs a key, an optional value "
                            "and an effect (NoSchedule, PreferNoSchedule or NoExecute)."
                        )
                        % {"taint": taint}
                    )
        if errors:
            raise ValidationError(errors)


class Pool(models.Model):
    """GPUs shared by several projects (a Kueue cohort, a Slurm parent account)."""

    slug = models.SlugField(_("slug"), max_length=63, unique=True)
    name = models.CharField(_("name"), max_length=200)
    description = models.TextField(_("description"), blank=True)
    parent = models.ForeignKey(
        "self",
        verbose_name=_("parent pool"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="children",
    )
    history = HistoricalRecords()

    class Meta:
        ordering = ["name"]
        verbose_name = _("pool")
        verbose_name_plural = _("pools")
        constraints = [
            models.CheckConstraint(condition=~Q(parent=F("id")), name="pool_not_own_parent"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("pool_detail", args=[self.slug])


class PoolCapacity(models.Model):
    pool = models.ForeignKey(
        Pool, verbose_name=_("pool"), on_delete=models.CASCADE, related_name="capacities"
    )
    flavor = models.ForeignKey(
        GpuFlavor, verbose_name=_("flavor"), on_delete=models.PROTECT, related_name="capacities"
    )
    gpus = models.PositiveIntegerField(_("GPUs"))
    history = HistoricalRecords()

    class Meta:
        ordering = ["pool__name", "flavor__name"]
        verbose_name = _("pool capacity")
        verbose_name_plural = _("pool capacities")
        constraints = [
            models.UniqueConstraint(fields=["pool", "flavor"], name="capacity_unique_flavor"),
            models.CheckConstraint(condition=Q(gpus__gte=0), name="capacity_gpus_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.pool}: {self.gpus} × {self.flavor}"


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
        _("GPU cap per job"), null=True, blank=True, help_text=_("Empty means no cap.")
    )
    max_gpus_total = models.PositiveIntegerField(
        _("GPU cap for the whole tier"), null=True, blank=True, help_text=_("Empty means no cap.")
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
    review_cycle_days = models.PositiveIntegerField(
        _("review cycle (days)"), validators=[MinValueValidator(1)]
    )
    last_reviewed_on = models.DateField(_("last reviewed on"), null=True, blank=True)
    next_review_on = models.DateField(_("next review due"), null=True, blank=True)
    is_default = models.BooleanField(_("default tier"), default=False)
    history = HistoricalRecords(m2m_fields=[preemptible_tiers])

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
    history = HistoricalRecords()

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


class Quota(models.Model):
    """What one project may use of one flavor in one pool."""

    project = models.ForeignKey(
        Project, verbose_name=_("project"), on_delete=models.PROTECT, related_name="quotas"
    )
    pool = models.ForeignKey(
        Pool, verbose_name=_("pool"), on_delete=models.PROTECT, related_name="quotas"
    )
    flavor = models.ForeignKey(
        GpuFlavor, verbose_name=_("flavor"), on_delete=models.PROTECT, related_name="quotas"
    )
    guarantee = models.PositiveIntegerField(
        _("guarantee (GPUs)"), help_text=_("GPUs the project always gets back when it asks.")
    )
    borrow_limit = models.PositiveIntegerField(
        _("borrow limit (GPUs)"),
        null=True,
        blank=True,
        help_text=_("Extra GPUs above the guarantee. Empty means no limit inside the pool."),
    )
    lending_limit = models.PositiveIntegerField(
        _("lending limit (GPUs)"),
        null=True,
        blank=True,
        help_text=_("How much of the idle guarantee others may borrow. Empty means all of it."),
    )
    fair_share_weight = models.PositiveIntegerField(_("fair-share weight"), default=1)
    reclaim_grace_minutes = models.PositiveIntegerField(
        _("reclaim grace (minutes)"),
        default=0,
        help_text=_("How long a borrower keeps lent GPUs after the owner asks them back."),
    )
    preemption_class = models.ForeignKey(
        PreemptionClass,
        verbose_name=_("preemption class"),
        on_delete=models.PROTECT,
        related_name="quotas",
    )
    history = HistoricalRecords()

    class Meta:
        ordering = ["project__name", "pool__name", "flavor__name"]
        verbose_name = _("quota")
        verbose_name_plural = _("quotas")
        constraints = [
            models.UniqueConstraint(
                fields=["project", "pool", "flavor"], name="quota_unique_project_pool_flavor"
            ),
            models.CheckConstraint(condition=Q(guarantee__gte=0), name="quota_guarantee_gte_0"),
            models.CheckConstraint(
                condition=Q(lending_limit__isnull=True) | Q(lending_limit__lte=F("guarantee")),
                name="quota_lending_lte_guarantee",
            ),
            models.CheckConstraint(
                condition=Q(fair_share_weight__gt=0), name="quota_weight_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project} · {self.pool} · {self.flavor}"

    def get_absolute_url(self) -> str:
        return reverse("quota_detail", args=[self.pk])

    def clean(self) -> None:
        if (
            self.lending_limit is not None
            and self.guarantee is not None
            and self.lending_limit > self.guarantee
        ):
            raise ValidationError(
                {
                    "lending_limit": gettext(
                        "The lending limit (%(lending)d GPUs) cannot exceed the guarantee "
                        "(%(guarantee)d GPUs): a project lends only what it is guaranteed."
                    )
                    % {"lending": self.lending_limit, "guarantee": self.guarantee}
                }
            )

    @property
    def maximum(self) -> int | None:
        """Guarantee plus borrow limit; ``None`` when borrowing is bounded only by the pool."""
        if self.borrow_limit is None:
            return None
        return self.guarantee + self.borrow_limit


class ReminderKind(models.TextChoices):
    DUE_SOON = "due_soon", _("Due soon")
    OVERDUE = "overdue", _("Overdue")


class ReviewReminder(models.Model):
    """A reminder mailed to a tier's owner; one per tier, kind and due date, never two."""

    tier = models.ForeignKey(
        PriorityTier, verbose_name=_("tier"), on_delete=models.CASCADE, related_name="reminders"
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
            models.CheckConstraint(
                condition=Q(kind__in=ReminderKind.values), name="reminder_kind_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.tier} ({self.due_on})"
