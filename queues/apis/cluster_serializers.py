"""What the cluster API reads and writes: its serializers, the fields of a cluster's settings
(``_settings_fields``), the change metadata, and the examples of its schema."""

from typing import Any

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import (
    OpenApiResponse,
)
from rest_framework import serializers

from governance.models import Pool
from governance.toolkit.api import (
    error_response,
)
from governance.toolkit.changes import ChangeOutputSerializer
from queues.models import (
    CA_BUNDLE_MAX_LENGTH,
    COMMAND_TIMEOUT_MAX,
    PATH_MAX_LENGTH,
    SubmitTableDelivery,
    SubmitTableLapse,
    slurm_name_validator,
    slurm_partition_validator,
    validate_absolute_path,
    validate_credentials_file_name,
    validate_kube_api_server,
    validate_namespace_template,
    validate_pem_bundle,
    validate_slurm_bin_dir,
)

FORBIDDEN = error_response(
    _("Only ops may see and sync clusters."),
    example={"error": "permission_denied", "detail": "Only ops may see clusters.", "fields": {}},
)


class SyncRunOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    trigger = serializers.CharField()
    status = serializers.CharField()
    progress = serializers.CharField()
    attempts = serializers.IntegerField()
    revision = serializers.IntegerField(source="revision_id", allow_null=True)
    plan = serializers.JSONField(
        help_text=_("Creates, updates, deletes and conflicts, field by field.")
    )
    result = serializers.JSONField()
    error = serializers.CharField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_seconds = serializers.FloatField(allow_null=True)

    class Meta:
        ref_name = "SyncRun"


SYNC_RUN_EXAMPLE = {
    "id": 41,
    "trigger": "manual",
    "status": "succeeded",
    "progress": "",
    "attempts": 1,
    "revision": 17,
    "plan": {"creates": [], "updates": [], "deletes": [], "conflicts": []},
    "result": {"applied": 3},
    "error": "",
    "created_at": "2026-12-01T08:00:00Z",
    "started_at": "2026-12-01T08:00:01Z",
    "finished_at": "2026-12-01T08:00:04Z",
    "duration_seconds": 3.2,
}
CLUSTER_EXAMPLE = {
    "name": "hpc",
    "backend": "slurm",
    "slurm_cluster": "hpc",
    "slurm_partition": "gpu",
    "slurm_conf": "/etc/slurm/slurm.conf",
    "slurm_bin_dir": "",
    "command_timeout": 30,
    "kube_api_server": "",
    "kube_ca_bundle": "",
    "kube_credentials_file": "",
    "submit_table_delivery": "write",
    "submit_table_lapse": "refuse",
    "kube_namespace_template": "{project}",
    "enabled": True,
    "pools": ["training", "inference"],
    "agent_fetched_at": None,
    "agent_fetch": {},
    "sync_due": False,
    "applied_revision": 17,
    "applied_at": "2026-12-01T08:00:04Z",
    "reachable": True,
    "error": "",
    "checked_at": "2026-12-01T07:59:00Z",
    "scheduler_version": "slurm 22.05.8",
    "tracked_resources": ["cpu", "mem", "gres/gpu", "gres/gpu:a100"],
    "drift_checked_at": "2026-12-01T08:00:04Z",
    "drift": [],
    "slurm_conf_lines": ["AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:h100"],
    "runs": [SYNC_RUN_EXAMPLE],
}


CHANGE_META_FIELDS = (
    "title",
    "ticket",
    "observation_days",
    "rollback_condition",
    "confirmation_reason",
)


class ChangeMetaInputSerializer(serializers.Serializer):
    """What every proposal says about itself: why, and optionally a title and a ticket."""

    reason = serializers.CharField(max_length=1000, help_text=_("Why: recorded in the history."))
    title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    ticket = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")
    observation_days = serializers.IntegerField(
        min_value=0, max_value=366, required=False, allow_null=True, default=None
    )
    rollback_condition = serializers.CharField(
        max_length=2000, required=False, allow_blank=True, default=""
    )
    confirmation_reason = serializers.CharField(
        max_length=1000, required=False, allow_blank=True, default=""
    )

    class Meta:
        ref_name = "ClusterChangeMeta"


def _change_kwargs(validated: dict[str, Any]) -> dict[str, Any]:
    meta = {name: validated.pop(name) for name in CHANGE_META_FIELDS if name in validated}
    if meta.get("observation_days") is None:
        meta.pop("observation_days", None)
    return meta


def _settings_fields(*, partial: bool) -> dict[str, serializers.Field]:
    """The connection settings as API fields (the model's validators run on each value)."""
    opt: dict[str, Any] = {"required": False}
    return {
        "slurm_cluster": serializers.CharField(
            max_length=63, allow_blank=True, validators=[slurm_name_validator], **opt
        ),
        "slurm_partition": serializers.CharField(
            max_length=63,
            allow_blank=True,
            validators=[slurm_partition_validator],
            help_text=_("The partition jobs are submitted to; empty: the default partition."),
            **opt,
        ),
        "slurm_conf": serializers.CharField(
            max_length=PATH_MAX_LENGTH,
            allow_blank=True,
            validators=[validate_absolute_path],
            help_text=_("Absolute path of slurm.conf on the worker; empty: the default."),
            **opt,
        ),
        "slurm_bin_dir": serializers.CharField(
            max_length=PATH_MAX_LENGTH,
            allow_blank=True,
            validators=[validate_slurm_bin_dir],
            help_text=_("One of ARBITER_SLURM_BIN_DIRS; empty: the worker's PATH."),
            **opt,
        ),
        "command_timeout": serializers.IntegerField(
            min_value=1, max_value=COMMAND_TIMEOUT_MAX, **opt
        ),
        "kube_api_server": serializers.CharField(
            max_length=PATH_MAX_LENGTH,
            allow_blank=True,
            validators=[validate_kube_api_server],
            **opt,
        ),
        "kube_ca_bundle": serializers.CharField(
            max_length=CA_BUNDLE_MAX_LENGTH,
            allow_blank=True,
            trim_whitespace=False,
            validators=[validate_pem_bundle],
            **opt,
        ),
        "kube_credentials_file": serializers.CharField(
            max_length=255,
            allow_blank=True,
            validators=[validate_credentials_file_name],
            help_text=_("A file name in ARBITER_KUBE_CREDENTIALS_DIR."),
            **opt,
        ),
        "kube_namespace_template": serializers.CharField(
            max_length=63, validators=[validate_namespace_template], **opt
        ),
        "submit_table_delivery": serializers.ChoiceField(
            choices=SubmitTableDelivery.choices,
            help_text=_(
                "Slurm: the sync writes the job_submit table beside slurm.conf (write), or the "
                "pull agent on the controller host fetches it from the API (pull)."
            ),
            **opt,
        ),
        "submit_table_lapse": serializers.ChoiceField(
            choices=SubmitTableLapse.choices,
            help_text=_(
                "Slurm: once the table has expired the plugin refuses governed GPU jobs "
                "(refuse) or falls back to Slurm's native limits and the guard (native)."
            ),
            **opt,
        ),
        "enabled": serializers.BooleanField(**opt),
        "pools": PoolSlugsField(**opt),
    }


class PoolSlugsField(serializers.ListField):
    """Pools by slug: each slug is checked (no NUL byte reaches the database) before one
    query finds them all; an unknown slug is a 400 naming it."""

    child = serializers.SlugField(max_length=50)

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", _("The slugs of the pools the cluster serves."))
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> list[Pool]:
        slugs = super().to_internal_value(data)
        found = {pool.slug: pool for pool in Pool.objects.filter(slug__in=slugs)}
        unknown = [slug for slug in slugs if slug not in found]
        if unknown:
            raise serializers.ValidationError(
                _("No pool named %(slugs)s.") % {"slugs": ", ".join(unknown)}
            )
        return [found[slug] for slug in dict.fromkeys(slugs)]


PROPOSED = OpenApiResponse(
    response=ChangeOutputSerializer,
    description=_("The proposed rule change: applied once another ops user approves it."),
)
