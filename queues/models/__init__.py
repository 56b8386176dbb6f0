"""Clusters Arbiter syncs its rules to, and the record of every sync.

``Cluster`` is governed configuration (ops edit it through the services, with a reason, and
it keeps its history). ``ClusterSyncState`` is what the sync itself maintains per cluster:
the revision and the desired state last applied (the baseline for drift), the latest drift
check, and the lease that lets one sync at a time run. ``SyncRun`` records each sync or dry
run: trigger, plan, result, error, timing and progress.
"""

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from governance.models import Pool, RulesRevision

slurm_name_validator = RegexValidator(
    r"^[a-z0-9][a-z0-9_.-]*$",
    _("Use lowercase letters, digits, dots, dashes and underscores (Slurm lowercases names)."),
)


class ClusterBackend(models.TextChoices):
    # Kueue joins with its backend (scheduler sync, part 2).
    SLURM = "slurm", _("Slurm")


class Cluster(models.Model):
    """A scheduler that enforces the rules of the pools it serves."""

    name = models.SlugField(_("name"), max_length=63, unique=True)
    backend = models.CharField(
        _("backend"), max_length=16, choices=ClusterBackend.choices, default=ClusterBackend.SLURM
    )
    slurm_cluster = models.CharField(
        _("Slurm cluster name"),
        max_length=63,
        validators=[slurm_name_validator],
        help_text=_("ClusterName in slurm.conf, as sacctmgr knows it."),
    )
    slurm_conf = models.CharField(
        _("SLURM_CONF path"),
        max_length=500,
        blank=True,
        help_text=_("Path of slurm.conf on the host that runs the sync; empty uses the default."),
    )
    command_prefix = models.CharField(
        _("command prefix"),
        max_length=500,
        blank=True,
        help_text=_(
            "Put before every Slurm command, e.g. “ssh slurm-head” or “sudo -n”; "
            "empty runs the commands directly."
        ),
    )
    pools = models.ManyToManyField(
        Pool,
        verbose_name=_("pools it serves"),
        related_name="clusters",
        help_text=_("Only the quotas of these pools are compiled for the cluster."),
    )
    enabled = models.BooleanField(
        _("enabled"),
        default=True,
        help_text=_("Enabled clusters are synced after every rule change and periodically."),
    )
    history = HistoricalRecords(m2m_fields=[pools])

    class Meta:
        ordering = ["name"]
        verbose_name = _("cluster")
        verbose_name_plural = _("clusters")
        constraints = [
            models.CheckConstraint(
                condition=Q(backend__in=ClusterBackend.values), name="cluster_backend_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("cluster_detail", args=[self.name])

    @property
    def latest_run_status_label(self) -> str:
        """The translated label of ``latest_run_status`` (annotated by ``cluster_list``)."""
        status = getattr(self, "latest_run_status", None)
        return str(SyncStatus(status).label) if status in SyncStatus.values else ""


class ClusterSyncState(models.Model):
    """What the sync keeps per cluster (not governed: the sync writes it, not people)."""

    cluster = models.OneToOneField(
        Cluster, verbose_name=_("cluster"), on_delete=models.CASCADE, related_name="sync_state"
    )
    applied_revision = models.ForeignKey(
        RulesRevision,
        verbose_name=_("applied revision"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    applied_state = models.JSONField(
        _("applied desired state"),
        default=dict,
        blank=True,
        help_text=_(
            "The objects and values the last successful sync wrote: drift is measured against it."
        ),
    )
    applied_at = models.DateTimeField(_("applied at"), null=True, blank=True)
    drift = models.JSONField(_("drift"), default=list, blank=True)
    drift_checked_at = models.DateTimeField(_("drift checked at"), null=True, blank=True)
    drift_error = models.TextField(_("drift check error"), blank=True)
    # One sync at a time: a lease that expires, so a crashed worker never blocks for good.
    lease_token = models.CharField(_("lease token"), max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(_("lease expires at"), null=True, blank=True)

    class Meta:
        verbose_name = _("cluster sync state")
        verbose_name_plural = _("cluster sync states")

    def __str__(self) -> str:
        return f"{self.cluster}: {self.applied_revision or '-'}"


class SyncTrigger(models.TextChoices):
    RULE_CHANGE = "rule_change", _("Rule change")
    GRANT = "grant", _("Grant started or ended")
    PERIODIC = "periodic", _("Periodic")
    MANUAL = "manual", _("Manual")
    DRY_RUN = "dry_run", _("Dry run")


class SyncStatus(models.TextChoices):
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    RETRYING = "retrying", _("Waiting to retry")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")


FINISHED_STATUSES = (SyncStatus.SUCCEEDED, SyncStatus.FAILED)


class SyncRun(models.Model):
    """One sync (or dry run) of one cluster."""

    cluster = models.ForeignKey(
        Cluster, verbose_name=_("cluster"), on_delete=models.CASCADE, related_name="sync_runs"
    )
    trigger = models.CharField(_("trigger"), max_length=16, choices=SyncTrigger.choices)
    status = models.CharField(
        _("status"), max_length=16, choices=SyncStatus.choices, default=SyncStatus.QUEUED
    )
    progress = models.CharField(_("progress"), max_length=200, blank=True)
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    revision = models.ForeignKey(
        RulesRevision,
        verbose_name=_("rules revision"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text=_("The newest rules revision when the sync read the rules."),
    )
    plan = models.JSONField(_("plan"), default=list, blank=True)
    result = models.JSONField(_("result"), default=dict, blank=True)
    error = models.TextField(_("error"), blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("requested by"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)

    class Meta:
        ordering = ["-pk"]
        verbose_name = _("sync run")
        verbose_name_plural = _("sync runs")
        indexes = [models.Index(fields=["cluster", "-id"], name="syncrun_cluster_recent")]
        constraints = [
            models.CheckConstraint(
                condition=Q(trigger__in=SyncTrigger.values), name="syncrun_trigger_valid"
            ),
            models.CheckConstraint(
                condition=Q(status__in=SyncStatus.values), name="syncrun_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster} #{self.pk} {self.get_trigger_display()}"

    @property
    def is_dry_run(self) -> bool:
        return self.trigger == SyncTrigger.DRY_RUN

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class AlertKind(models.TextChoices):
    OUT_OF_SYNC = "out_of_sync", _("Cluster out of sync")
    LONG_WAIT = "long_wait", _("Job waiting past its tier's threshold")
    RULE_NOT_ENFORCED = "rule_not_enforced", _("Rule not enforced by the scheduler")


class Alert(models.Model):
    """Something ops (or a tier owner) must look at, raised and closed by a periodic check.

    One alert is open per ``(kind, key)`` at a time (the key names what it is about, e.g.
    ``cluster:3`` or ``job:7:1234``): a check that finds the same condition again updates the
    open alert instead of raising a second one, and closes it once the condition is gone.
    ``details`` holds the parameters the text is rendered from, in the reader's language.
    Not governed: checks write alerts, people only read them.
    """

    kind = models.CharField(_("kind"), max_length=32, choices=AlertKind.choices)
    key = models.CharField(_("key"), max_length=200)
    cluster = models.ForeignKey(
        Cluster,
        verbose_name=_("cluster"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="alerts",
    )
    details = models.JSONField(_("details"), default=dict, blank=True)
    opened_at = models.DateTimeField(_("opened at"))
    updated_at = models.DateTimeField(_("updated at"))
    closed_at = models.DateTimeField(_("closed at"), null=True, blank=True)
    recipients = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("recipients"),
        through="AlertRecipient",
        related_name="alerts",
    )

    class Meta:
        ordering = ["-opened_at", "-pk"]
        verbose_name = _("alert")
        verbose_name_plural = _("alerts")
        indexes = [models.Index(fields=["kind", "closed_at"], name="alert_kind_open")]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=AlertKind.values), name="alert_kind_valid"),
            models.UniqueConstraint(
                fields=["kind", "key"],
                condition=Q(closed_at__isnull=True),
                name="alert_one_open_per_key",
            ),
            models.CheckConstraint(
                condition=Q(closed_at__isnull=True) | Q(closed_at__gte=models.F("opened_at")),
                name="alert_closes_after_it_opens",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.key}"

    @property
    def is_open(self) -> bool:
        return self.closed_at is None


class AlertRecipient(models.Model):
    """Who an alert is for; ``mailed_at`` makes the mail go out once per person."""

    alert = models.ForeignKey(
        Alert, verbose_name=_("alert"), on_delete=models.CASCADE, related_name="deliveries"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="alert_deliveries",
    )
    mailed_at = models.DateTimeField(_("mailed at"), null=True, blank=True)
    read_at = models.DateTimeField(_("read at"), null=True, blank=True)

    class Meta:
        verbose_name = _("alert recipient")
        verbose_name_plural = _("alert recipients")
        constraints = [
            models.UniqueConstraint(fields=["alert", "user"], name="alert_recipient_once"),
        ]

    def __str__(self) -> str:
        return f"{self.alert} → {self.user}"


# Workload evidence (jobs and their events) lives in its own module.
from .workload import (  # noqa: E402
    ACTIVE_STATES,
    FINISHED_STATES,
    CollectorState,
    EventKind,
    JobState,
    WaitCategory,
    WorkloadEvent,
    WorkloadJob,
)

__all__ = [
    "ACTIVE_STATES",
    "FINISHED_STATES",
    "FINISHED_STATUSES",
    "Alert",
    "AlertKind",
    "AlertRecipient",
    "Cluster",
    "ClusterBackend",
    "ClusterSyncState",
    "CollectorState",
    "EventKind",
    "JobState",
    "SyncRun",
    "SyncStatus",
    "SyncTrigger",
    "WaitCategory",
    "WorkloadEvent",
    "WorkloadJob",
    "slurm_name_validator",
]
