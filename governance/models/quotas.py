"""Quotas: what one project may use of one flavor in one pool."""

from datetime import date, timedelta

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from .changes import ChangeLinkedHistory
from .projects import Project
from .resources import GpuFlavor, Pool
from .tiers import PreemptionClass


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
    fair_share_weight = models.PositiveIntegerField(
        _("fair-share weight"), default=1, validators=[MinValueValidator(1)]
    )
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
    review_cycle_days = models.PositiveIntegerField(
        _("review cycle (days)"),
        default=180,
        validators=[MinValueValidator(1)],
        help_text=_("How often the project's leads and ops check that the quota still fits."),
    )
    last_reviewed_on = models.DateField(_("last reviewed on"), null=True, blank=True)
    next_review_on = models.DateField(_("next review due"), null=True, blank=True)
    history = HistoricalRecords(bases=[ChangeLinkedHistory])

    class Meta:
        ordering = ["project__name", "pool__name", "flavor__name"]
        verbose_name = _("quota")
        verbose_name_plural = _("quotas")
        indexes = [
            # Counts the projects of a pool from the index alone (the pool list).
            models.Index(fields=["pool", "project"], name="quota_pool_project"),
            # Sums the guarantees per pool and flavor from the index alone (pool usage).
            models.Index(fields=["pool", "flavor", "guarantee"], name="quota_usage"),
        ]
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
            models.CheckConstraint(
                condition=Q(review_cycle_days__gt=0), name="quota_review_cycle_positive"
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

    def review_due_from(self, reviewed_on: date) -> date:
        return reviewed_on + timedelta(days=self.review_cycle_days)

    @property
    def maximum(self) -> int | None:
        """Guarantee plus borrow limit; ``None`` when borrowing is bounded only by the pool."""
        if self.borrow_limit is None:
            return None
        return self.guarantee + self.borrow_limit
