"""Grants (time-boxed changes of the effective rules) and rules revisions."""

from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from .projects import Project
from .resources import GpuFlavor, Pool
from .tiers import PreemptionClass, PriorityTier


class GrantKind(models.TextChoices):
    PRIORITY_UPGRADE = "priority_upgrade", _("Priority upgrade")
    QUOTA_EXCEPTION = "quota_exception", _("Quota exception")
    PREEMPTION_PROTECTION = "preemption_protection", _("Preemption protection")
    QUEUE_JUMP = "queue_jump", _("Queue jump")


class GrantState(models.TextChoices):
    SCHEDULED = "scheduled", _("Scheduled")
    ACTIVE = "active", _("Active")
    EXPIRED = "expired", _("Expired")
    REVOKED = "revoked", _("Revoked")


class Grant(models.Model):
    """An approved, time-boxed change of the effective rules (created from a request).

    Whether a grant applies at an instant depends only on ``starts_at``, ``ends_at`` and
    ``revoked_at``; ``state`` records the transitions that the beat task has carried out
    (and the scheduler syncs they triggered).
    """

    kind = models.CharField(_("kind"), max_length=32, choices=GrantKind.choices)
    project = models.ForeignKey(
        Project, verbose_name=_("project"), on_delete=models.PROTECT, related_name="grants"
    )
    state = models.CharField(
        _("state"), max_length=16, choices=GrantState.choices, default=GrantState.SCHEDULED
    )
    tier = models.ForeignKey(
        PriorityTier,
        verbose_name=_("tier"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="grants",
        help_text=_("Priority upgrades and queue jumps: the tier granted."),
    )
    pool = models.ForeignKey(
        Pool,
        verbose_name=_("pool"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="grants",
    )
    flavor = models.ForeignKey(
        GpuFlavor,
        verbose_name=_("flavor"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="grants",
    )
    extra_gpus = models.PositiveIntegerField(
        _("extra GPUs"),
        null=True,
        blank=True,
        help_text=_("Quota exceptions: GPUs added to the maximum (guarantee + borrow limit)."),
    )
    lift_borrow_limit = models.BooleanField(
        _("lift the borrow limit"),
        default=False,
        help_text=_("Quota exceptions: borrow without limit inside the pool."),
    )
    preemption_class = models.ForeignKey(
        PreemptionClass,
        verbose_name=_("preemption class"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="grants",
        help_text=_("Preemption protection: the stricter class the workloads get."),
    )
    job_ids = models.JSONField(
        _("scheduler job ids"),
        default=list,
        blank=True,
        help_text=_("Named jobs only; empty means all of the project's work."),
    )
    starts_at = models.DateTimeField(_("starts at"))
    ends_at = models.DateTimeField(_("ends at"))
    source = models.CharField(
        _("source"), max_length=100, blank=True, help_text=_("What it came from, e.g. a request.")
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    revoked_at = models.DateTimeField(_("revoked at"), null=True, blank=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["-starts_at", "-pk"]
        verbose_name = _("grant")
        verbose_name_plural = _("grants")
        indexes = [models.Index(fields=["starts_at", "ends_at"], name="grant_window")]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=GrantKind.values), name="grant_kind_valid"),
            models.CheckConstraint(
                condition=Q(state__in=GrantState.values), name="grant_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(ends_at__gt=F("starts_at")), name="grant_ends_after_start"
            ),
            models.CheckConstraint(
                condition=~Q(kind__in=[GrantKind.PRIORITY_UPGRADE, GrantKind.QUEUE_JUMP])
                | Q(tier__isnull=False),
                name="grant_tier_needed",
            ),
            models.CheckConstraint(
                condition=~Q(kind=GrantKind.QUOTA_EXCEPTION)
                | (
                    Q(pool__isnull=False, flavor__isnull=False)
                    & (Q(extra_gpus__gt=0) | Q(lift_borrow_limit=True))
                ),
                name="grant_quota_exception_complete",
            ),
            models.CheckConstraint(
                condition=~Q(kind=GrantKind.PREEMPTION_PROTECTION)
                | Q(preemption_class__isnull=False),
                name="grant_protection_class_needed",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} · {self.project} · {self.starts_at:%Y-%m-%d %H:%M}"

    def is_active_at(self, at: datetime) -> bool:
        return self.starts_at <= at < self.ends_at and (
            self.revoked_at is None or self.revoked_at > at
        )

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.starts_at and self.ends_at and self.ends_at <= self.starts_at:
            errors["ends_at"] = gettext("A grant must end after it starts.")
        if self.kind in (GrantKind.PRIORITY_UPGRADE, GrantKind.QUEUE_JUMP) and not self.tier_id:
            errors["tier"] = gettext("Say which tier is granted.")
        if self.kind == GrantKind.QUEUE_JUMP and not self.job_ids:
            errors["job_ids"] = gettext("A queue jump names the pending jobs it raises.")
        if self.kind == GrantKind.QUOTA_EXCEPTION:
            if not (self.pool_id and self.flavor_id):
                errors["pool"] = gettext("A quota exception names a pool and a flavor.")
            if not (self.extra_gpus or self.lift_borrow_limit):
                errors["extra_gpus"] = gettext(
                    "A quota exception adds GPUs or lifts the borrow limit."
                )
        if self.kind == GrantKind.PREEMPTION_PROTECTION and not self.preemption_class_id:
            errors["preemption_class"] = gettext("Say which preemption class protects the work.")
        if not isinstance(self.job_ids, list) or not all(
            isinstance(job, str) and job.strip() for job in self.job_ids
        ):
            errors["job_ids"] = gettext("Job ids must be a list of non-empty strings.")
        if errors:
            raise ValidationError(errors)


class RevisionTrigger(models.TextChoices):
    RULE_CHANGE = "rule_change", _("Rule change applied")
    GRANT_STARTED = "grant_started", _("Grant started")
    GRANT_ENDED = "grant_ended", _("Grant ended")
    MANUAL = "manual", _("Manual")


class RulesRevision(models.Model):
    """One row each time the effective rules change: the scheduler sync is due from here.

    A cluster is in sync when it has applied the newest revision; nothing is lost while a
    scheduler is down, because the revisions wait here until a sync succeeds.
    """

    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    trigger = models.CharField(_("trigger"), max_length=32, choices=RevisionTrigger.choices)
    note = models.CharField(_("note"), max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("by"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        ordering = ["-pk"]
        verbose_name = _("rules revision")
        verbose_name_plural = _("rules revisions")
        constraints = [
            models.CheckConstraint(
                condition=Q(trigger__in=RevisionTrigger.values), name="revision_trigger_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.get_trigger_display()}"
