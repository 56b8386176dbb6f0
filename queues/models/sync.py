"""What the sync maintains per cluster (``ClusterSyncState``: the revision and desired state
last applied, drift, the lease) and the record of every sync or dry run (``SyncRun``)."""

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from governance.models import RulesRevision

# SyncStatus lives beside Cluster, whose label of its latest run reads it.
from .cluster import Cluster, SyncStatus
from .run import RunRecord


class SyncDueReason(models.TextChoices):
    """Why a cluster is due although it applied the newest rules revision."""

    NONE = "", _("—")
    DRIFT = "drift", _("Live values differ from the applied ones")
    FAILED = "failed", _("The last sync failed")


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
    # Kueue: Arbiter's enforcer (queues.services.kueue.enforce): its last pass, what it
    # changed, and the day's preemption counts it keeps per Workload.
    enforced_at = models.DateTimeField(_("enforcer's last pass"), null=True, blank=True)
    enforcer = models.JSONField(_("enforcer"), default=dict, blank=True)
    # The last connection check ("Check now", periodic): pages show it with its age and
    # never call the scheduler themselves.
    check_requested_at = models.DateTimeField(_("check requested at"), null=True, blank=True)
    checked_at = models.DateTimeField(_("checked at"), null=True, blank=True)
    check_ok = models.BooleanField(_("reachable"), null=True, blank=True)
    check_error = models.TextField(_("check error"), blank=True)
    scheduler_version = models.CharField(_("scheduler version"), max_length=100, blank=True)
    tracked_resources = models.JSONField(
        _("tracked resources"),
        default=list,
        blank=True,
        help_text=_("What the scheduler accounts for, e.g. Slurm's TRES (gres/gpu:h100)."),
    )
    # A cluster whose table is pulled (Cluster.submit_table_delivery): the table's bytes as
    # the sync and the guard render them (served as they are by the API), and the pull
    # agent's last fetch (when, from which host, what it had, what it got).
    submit_table = models.TextField(_("submit table"), blank=True)
    agent_fetched_at = models.DateTimeField(_("agent's last fetch"), null=True, blank=True)
    agent_fetch = models.JSONField(_("agent's last fetch"), default=dict, blank=True)
    ledger = models.JSONField(
        _("ledger"),
        default=dict,
        blank=True,
        help_text=_(
            "The names of the objects Arbiter created in this cluster, per kind: a marked "
            "object not listed here was made by hand and is never deleted."
        ),
    )
    # Set by a failed sync or by drift, cleared by a successful sync: the cluster is due then
    # even with the newest rules applied, so the periodic sync (and a task's retries) go on.
    due_reason = models.CharField(
        _("due because"), max_length=16, choices=SyncDueReason.choices, blank=True, default=""
    )
    # Arbiter's job_submit plugin on a Slurm cluster (see queues/services/slurm/submit.py):
    # installed, current, and the table it reads; refreshed by each sync and guard run.
    submit_plugin = models.JSONField(_("submit plugin"), default=dict, blank=True)
    submit_plugin_checked_at = models.DateTimeField(
        _("submit plugin checked at"), null=True, blank=True
    )
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


FINISHED_STATUSES = (SyncStatus.SUCCEEDED, SyncStatus.NEEDS_ATTENTION, SyncStatus.FAILED)


class Enforcement(models.TextChoices):
    """How the scheduler holds a rule (shown per rule in every plan)."""

    NATIVE = "native", _("Enforced by the scheduler")
    SUBMIT = "submit", _("Enforced at submit time by Arbiter's job_submit plugin")
    GUARD = "guard", _("Enforced by Arbiter's guard")
    ARBITER = "arbiter", _("Enforced by Arbiter's enforcer on the cluster's workloads")
    NOT_ENFORCED = "not_enforced", _("Not enforced on this cluster")


class SyncRun(RunRecord):
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
