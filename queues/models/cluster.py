"""Clusters Arbiter syncs its rules to (governed configuration, with history), and the
checks on their connection settings."""

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

from governance.models import Pool
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


class SubmitTableDelivery(models.TextChoices):
    """How a Slurm cluster's job_submit table reaches the controller."""

    WRITE = "write", _("written by the sync beside slurm.conf")
    PULL = "pull", _("fetched by the pull agent on the controller host")


class SubmitTableLapse(models.TextChoices):
    """What the job_submit plugin does once its table has expired (Arbiter unreachable, or
    the sync failing, longer than the table's life). An alert is raised either way."""

    REFUSE = "refuse", _("refuse GPU jobs of governed projects")
    NATIVE = "native", _("fall back to Slurm's native limits and Arbiter's guard")


class SyncStatus(models.TextChoices):
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    RETRYING = "retrying", _("Waiting to retry")
    SUCCEEDED = "succeeded", _("Succeeded")
    # Written, but some objects clash with hand-made ones: the rules stay due.
    NEEDS_ATTENTION = "needs_attention", _("Needs attention")
    FAILED = "failed", _("Failed")


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
    submit_table_delivery = models.CharField(
        _("submit table delivery"),
        max_length=8,
        choices=SubmitTableDelivery.choices,
        default=SubmitTableDelivery.WRITE,
        help_text=_(
            "Slurm: how the job_submit plugin's table reaches the controller. “Pull”: no shared "
            "file system; the pull agent on the controller host fetches it from the API."
        ),
    )
    submit_table_lapse = models.CharField(
        _("when the submit table expires"),
        max_length=8,
        choices=SubmitTableLapse.choices,
        default=SubmitTableLapse.REFUSE,
        help_text=_(
            "Slurm: what the job_submit plugin does once its table has expired (Arbiter "
            "unreachable or the sync failing longer than the table's life). Ops are alerted "
            "either way."
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
            models.CheckConstraint(
                condition=Q(submit_table_delivery__in=SubmitTableDelivery.values),
                name="cluster_submit_table_delivery_valid",
            ),
            models.CheckConstraint(
                condition=Q(submit_table_lapse__in=SubmitTableLapse.values),
                name="cluster_submit_table_lapse_valid",
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
