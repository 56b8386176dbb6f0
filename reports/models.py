"""Stored reviews: the metrics of a window and the findings drawn from them, frozen once built.

A review is requested (by ops, or by the monthly schedule), built by a Celery task, and never
changes afterwards: the numbers a meeting discussed stay as they were. Building the same window
again makes a new version. Not governed (no history): a built row is immutable, enforced by a
database trigger (see the migration) on top of the services, which never write a built review.
"""

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.urls import reverse
from django.utils.translation import gettext_lazy as _


class ReviewStatus(models.TextChoices):
    QUEUED = "queued", _("Queued")
    BUILDING = "building", _("Building")
    DONE = "done", _("Built")
    FAILED = "failed", _("Failed")


class MonthlyReview(models.Model):
    """One version of the review of a window (a calendar month by default), for the whole site
    or one pool or project. ``metrics`` is ``reports.selectors.review_metrics``'s answer at
    build time, ``project_metrics`` the same per project (for the leads' views), ``findings``
    the findings in words with their evidence."""

    start = models.DateTimeField(_("start"))
    end = models.DateTimeField(_("end"))
    pool = models.SlugField(_("pool"), max_length=64, blank=True, default="")
    project = models.SlugField(_("project"), max_length=64, blank=True, default="")
    version = models.PositiveIntegerField(_("version"))
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("requested by"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text=_("Empty: built by the monthly schedule."),
    )
    requested_at = models.DateTimeField(_("requested at"))
    built_at = models.DateTimeField(_("built at"), null=True, blank=True)
    status = models.CharField(
        _("status"), max_length=16, choices=ReviewStatus.choices, default=ReviewStatus.QUEUED
    )
    progress = models.PositiveSmallIntegerField(_("progress (%)"), default=0)
    error = models.TextField(_("error"), blank=True, default="")
    metrics = models.JSONField(_("metrics"), default=dict, blank=True)
    project_metrics = models.JSONField(_("metrics per project"), default=dict, blank=True)
    findings = models.JSONField(_("findings"), default=list, blank=True)

    class Meta:
        ordering = ["-start", "-version", "-pk"]
        verbose_name = _("monthly review")
        verbose_name_plural = _("monthly reviews")
        constraints = [
            models.UniqueConstraint(
                fields=["start", "end", "pool", "project", "version"],
                name="review_one_version_per_window",
            ),
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="review_end_after_start"),
            models.CheckConstraint(
                condition=Q(status__in=ReviewStatus.values), name="review_status_valid"
            ),
            models.CheckConstraint(condition=Q(version__gte=1), name="review_version_positive"),
            models.CheckConstraint(condition=Q(progress__lte=100), name="review_progress_percent"),
            models.CheckConstraint(
                condition=~Q(status=ReviewStatus.DONE)
                | (Q(built_at__isnull=False) & Q(progress=100)),
                name="review_built_has_time_and_full_progress",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.window_label} v{self.version}"

    def get_absolute_url(self) -> str:
        return reverse("report_detail", args=[self.pk])

    @property
    def window_label(self) -> str:
        from django.utils import timezone

        start = timezone.localtime(self.start)
        end = timezone.localtime(self.end)
        if (
            start.day == 1
            and end.day == 1
            and start.time() == end.time() == start.time().replace(hour=0, minute=0)
            and (end.year * 12 + end.month) - (start.year * 12 + start.month) == 1
        ):
            return start.strftime("%Y-%m")
        return f"{start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M}"

    @property
    def is_built(self) -> bool:
        return self.status == ReviewStatus.DONE

    @property
    def is_finished(self) -> bool:
        return self.status in (ReviewStatus.DONE, ReviewStatus.FAILED)
