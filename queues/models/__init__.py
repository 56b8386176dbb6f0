"""Clusters Arbiter syncs its rules to, and the record of every sync.

``Cluster`` is governed configuration (ops edit it through the services, with a reason, and
it keeps its history). ``ClusterSyncState`` is what the sync itself maintains per cluster:
the revision and the desired state last applied (the baseline for drift), the latest drift
check, and the lease that lets one sync at a time run. ``SyncRun`` records each sync or dry
run: trigger, plan, result, error, timing and progress.
"""

import base64
import binascii
import os
import re
import string
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import (
    MaxValueValidator,
    MinValueValidator,
    RegexValidator,
    URLValidator,
)
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from governance.models import Pool, RulesRevision
from governance.models.changes import ChangeLinkedHistory

slurm_name_validator = RegexValidator(
    r"^[a-z0-9][a-z0-9_.-]*$",
    _("Use lowercase letters, digits, dots, dashes and underscores (Slurm lowercases names)."),
)
# A partition goes into sbatch options as is: one word of safe characters (case kept).
slurm_partition_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
    _("Use letters, digits, dots, dashes and underscores, starting with a letter or digit."),
)

COMMAND_TIMEOUT_MAX = 600
CA_BUNDLE_MAX_LENGTH = 100_000
PATH_MAX_LENGTH = 500
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NAMESPACE_PLACEHOLDERS = frozenset({"project", "pool"})
CREDENTIALS_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$")
PEM_CERTIFICATE = re.compile(
    r"-----BEGIN CERTIFICATE-----\r?\n([A-Za-z0-9+/=\r\n]+)-----END CERTIFICATE-----"
)


def _setting_dirs(name: str) -> list[str]:
    value = getattr(settings, name, [])
    if isinstance(value, str):
        value = value.split(":")
    return [os.path.normpath(item) for item in value if item and os.path.isabs(item)]


def slurm_bin_dirs() -> list[str]:
    """The directories of Slurm client binaries the deployer allows (``ARBITER_SLURM_BIN_DIRS``)."""
    return _setting_dirs("ARBITER_SLURM_BIN_DIRS")


def kube_credentials_dir() -> str:
    """The directory of Kubernetes credentials files (``ARBITER_KUBE_CREDENTIALS_DIR``)."""
    dirs = _setting_dirs("ARBITER_KUBE_CREDENTIALS_DIR")
    return dirs[0] if dirs else ""


def _refuse_control_characters(value: str) -> None:
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        raise ValidationError(
            _("Control characters (NUL, newlines, tabs) are not allowed here."), code="control"
        )


def validate_absolute_path(value: str) -> None:
    """An absolute, normalised path: no shell syntax can hide in it."""
    if not value:
        return
    _refuse_control_characters(value)
    if not os.path.isabs(value) or os.path.normpath(value) != value.rstrip("/") or "//" in value:
        raise ValidationError(
            _("Enter an absolute path without “..”, e.g. /etc/slurm/slurm.conf."), code="path"
        )


def validate_slurm_bin_dir(value: str) -> None:
    """One of the directories the deployer allows (empty: the worker's PATH)."""
    if not value:
        return
    validate_absolute_path(value)
    allowed = slurm_bin_dirs()
    if os.path.normpath(value) not in allowed:
        raise ValidationError(
            _(
                "Choose one of the directories the deployer allows in "
                "ARBITER_SLURM_BIN_DIRS: %(dirs)s."
            )
            % {"dirs": ", ".join(allowed) or _("none are allowed, leave it empty")},
            code="not_allowed",
        )


def validate_kube_api_server(value: str) -> None:
    if not value:
        return
    _refuse_control_characters(value)
    URLValidator(schemes=["https"], message=_("Enter an https:// URL of the API server."))(value)


def validate_pem_bundle(value: str) -> None:
    """One or more PEM certificate blocks, and nothing else but blank lines."""
    if not value:
        return
    if "\x00" in value:
        raise ValidationError(_("NUL characters are not allowed here."), code="control")
    blocks = list(PEM_CERTIFICATE.finditer(value))
    rest = PEM_CERTIFICATE.sub("", value).strip()
    if not blocks or rest:
        raise ValidationError(
            _(
                "Paste PEM certificates only: blocks from “-----BEGIN CERTIFICATE-----” to "
                "“-----END CERTIFICATE-----”."
            ),
            code="pem",
        )
    for block in blocks:
        try:
            base64.b64decode("".join(block.group(1).split()), validate=True)
        except (binascii.Error, ValueError):
            raise ValidationError(
                _("A certificate block is not valid base64."), code="pem"
            ) from None


def validate_credentials_file_name(value: str) -> None:
    """A file name inside ``ARBITER_KUBE_CREDENTIALS_DIR``: no directory, no “..”."""
    if not value:
        return
    _refuse_control_characters(value)
    if not CREDENTIALS_FILE_NAME.match(value) or value in (".", ".."):
        raise ValidationError(
            _(
                "Enter the name of a file in the deployer’s credentials directory "
                "(letters, digits, “.”, “-”, “_”; no “/”)."
            ),
            code="file_name",
        )


def namespace_placeholders(template: str) -> list[str]:
    try:
        names = [name for _text, name, _spec, _conv in string.Formatter().parse(template)]
    except ValueError:
        raise ValidationError(
            _("Unbalanced braces: use {project} and {pool} only."), code="template"
        ) from None
    return [name for name in names if name is not None]


def render_namespace(template: str, *, project: str, pool: str = "") -> str:
    return template.replace("{project}", project).replace("{pool}", pool)


def validate_namespace_template(value: str) -> None:
    _refuse_control_characters(value)
    names = namespace_placeholders(value)
    if "project" not in names or set(names) - NAMESPACE_PLACEHOLDERS:
        raise ValidationError(
            _("Use {project} (and optionally {pool}); no other placeholder."), code="template"
        )
    sample = render_namespace(value, project="p", pool="p")
    if not DNS_LABEL.match(sample):
        raise ValidationError(
            _(
                "The namespace must be a DNS-1123 label: lowercase letters, digits and “-”, "
                "starting and ending with a letter or digit."
            ),
            code="template",
        )


class ClusterBackend(models.TextChoices):
    SLURM = "slurm", _("Slurm")
    KUEUE = "kueue", _("Kubernetes (Kueue)")


class Cluster(models.Model):
    """A scheduler that enforces the rules of the pools it serves.

    Its connection is structured data, never a command: the path of ``slurm.conf``, a
    directory of Slurm client binaries from the deployer's allow-list and a bounded timeout
    for Slurm; an https API server, a CA bundle, a credentials file in the deployer's
    directory and a namespace naming rule for Kubernetes with Kueue. Creating and changing
    a cluster are rule changes (proposed, approved by someone else, applied).
    """

    name = models.SlugField(_("name"), max_length=63, unique=True)
    backend = models.CharField(
        _("backend"), max_length=16, choices=ClusterBackend.choices, default=ClusterBackend.SLURM
    )
    slurm_cluster = models.CharField(
        _("Slurm cluster name"),
        max_length=63,
        blank=True,
        validators=[slurm_name_validator],
        help_text=_("ClusterName in slurm.conf, as sacctmgr knows it."),
    )
    slurm_partition = models.CharField(
        _("Slurm partition"),
        max_length=63,
        blank=True,
        validators=[slurm_partition_validator],
        help_text=_(
            "The partition the cluster's jobs are submitted to (sbatch --partition); empty: "
            "the cluster's default partition."
        ),
    )
    slurm_conf = models.CharField(
        _("SLURM_CONF path"),
        max_length=PATH_MAX_LENGTH,
        blank=True,
        validators=[validate_absolute_path],
        help_text=_(
            "Absolute path of slurm.conf on the host that runs the sync; empty uses the default."
        ),
    )
    slurm_bin_dir = models.CharField(
        _("Slurm binaries directory"),
        max_length=PATH_MAX_LENGTH,
        blank=True,
        validators=[validate_slurm_bin_dir],
        help_text=_(
            "Where sacctmgr, squeue and scontrol are: one of the directories the deployer "
            "allows (ARBITER_SLURM_BIN_DIRS); empty finds them on the worker's PATH."
        ),
    )
    command_timeout = models.PositiveIntegerField(
        _("command timeout (seconds)"),
        default=60,
        validators=[MinValueValidator(1), MaxValueValidator(COMMAND_TIMEOUT_MAX)],
        help_text=_("How long one scheduler command or request may take (1 to 600 seconds)."),
    )
    kube_api_server = models.CharField(
        _("Kubernetes API server"),
        max_length=PATH_MAX_LENGTH,
        blank=True,
        validators=[validate_kube_api_server],
        help_text=_("https:// URL of the cluster's API server."),
    )
    kube_ca_bundle = models.TextField(
        _("CA bundle"),
        max_length=CA_BUNDLE_MAX_LENGTH,
        blank=True,
        validators=[validate_pem_bundle],
        help_text=_("PEM certificates that sign the API server's certificate."),
    )
    kube_credentials_file = models.CharField(
        _("credentials file"),
        max_length=255,
        blank=True,
        validators=[validate_credentials_file_name],
        help_text=_(
            "Name of a file in the deployer's directory ARBITER_KUBE_CREDENTIALS_DIR that holds "
            "a bearer token or a kubeconfig."
        ),
    )
    kube_namespace_template = models.CharField(
        _("namespace naming rule"),
        max_length=63,
        default="{project}",
        validators=[validate_namespace_template],
        help_text=_(
            "The namespace of each project's queues: {project} and optionally {pool}; the "
            "result must be a DNS-1123 label for every project."
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
    history = HistoricalRecords(m2m_fields=[pools], bases=[ChangeLinkedHistory])

    class Meta:
        ordering = ["name"]
        verbose_name = _("cluster")
        verbose_name_plural = _("clusters")
        constraints = [
            models.CheckConstraint(
                condition=Q(backend__in=ClusterBackend.values), name="cluster_backend_valid"
            ),
            models.CheckConstraint(
                condition=~Q(backend=ClusterBackend.SLURM) | ~Q(slurm_cluster=""),
                name="cluster_slurm_needs_cluster_name",
            ),
            models.CheckConstraint(
                condition=Q(backend=ClusterBackend.SLURM) | Q(slurm_partition=""),
                name="cluster_partition_only_for_slurm",
            ),
            models.CheckConstraint(
                condition=~Q(backend=ClusterBackend.KUEUE)
                | (~Q(kube_api_server="") & ~Q(kube_credentials_file="")),
                name="cluster_kueue_needs_api_server_and_credentials",
            ),
            models.CheckConstraint(
                condition=Q(command_timeout__gte=1, command_timeout__lte=COMMAND_TIMEOUT_MAX),
                name="cluster_command_timeout_bounded",
            ),
            models.CheckConstraint(
                condition=Q(kube_namespace_template__contains="{project}"),
                name="cluster_namespace_names_project",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("cluster_detail", args=[self.name])

    def clean(self) -> None:
        errors: dict[str, Any] = {}
        if self.backend == ClusterBackend.SLURM and not self.slurm_cluster:
            errors["slurm_cluster"] = _("A Slurm cluster needs its ClusterName.")
        if self.backend != ClusterBackend.SLURM and self.slurm_partition:
            errors["slurm_partition"] = _("Only a Slurm cluster has a partition.")
        if self.backend == ClusterBackend.KUEUE:
            if not self.kube_api_server:
                errors["kube_api_server"] = _("A Kueue cluster needs its API server URL.")
            if not self.kube_credentials_file:
                errors["kube_credentials_file"] = _(
                    "A Kueue cluster needs a credentials file (a token or a kubeconfig)."
                )
        if errors:
            raise ValidationError(errors)

    @property
    def latest_run_status_label(self) -> str:
        """The translated label of ``latest_run_status`` (annotated by ``cluster_list``)."""
        status = getattr(self, "latest_run_status", None)
        return str(SyncStatus(status).label) if status in SyncStatus.values else ""


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


class SyncStatus(models.TextChoices):
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    RETRYING = "retrying", _("Waiting to retry")
    SUCCEEDED = "succeeded", _("Succeeded")
    # Written, but some objects clash with hand-made ones: the rules stay due.
    NEEDS_ATTENTION = "needs_attention", _("Needs attention")
    FAILED = "failed", _("Failed")


FINISHED_STATUSES = (SyncStatus.SUCCEEDED, SyncStatus.NEEDS_ATTENTION, SyncStatus.FAILED)


class Enforcement(models.TextChoices):
    """How the scheduler holds a rule (shown per rule in every plan)."""

    NATIVE = "native", _("Enforced by the scheduler")
    SUBMIT = "submit", _("Enforced at submit time by Arbiter's job_submit plugin")
    GUARD = "guard", _("Enforced by Arbiter's guard")
    NOT_ENFORCED = "not_enforced", _("Not enforced on this cluster")


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
    GUARD_ACTION = "guard_action", _("Job held by Arbiter's guard")


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
from .replay import ChangeReplay, ReplaySide, ReplayStatus, ReplayWait  # noqa: E402
from .rollup import RollupState, WorkloadHour, WorkloadJobRollup, WorkloadWait  # noqa: E402
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
    "ChangeReplay",
    "Cluster",
    "ClusterBackend",
    "ClusterSyncState",
    "CollectorState",
    "EventKind",
    "JobState",
    "ReplaySide",
    "ReplayStatus",
    "ReplayWait",
    "RollupState",
    "SyncDueReason",
    "SyncRun",
    "SyncStatus",
    "SyncTrigger",
    "WaitCategory",
    "WorkloadEvent",
    "WorkloadHour",
    "WorkloadJob",
    "WorkloadJobRollup",
    "WorkloadWait",
    "slurm_name_validator",
    "slurm_partition_validator",
]
