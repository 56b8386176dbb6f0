"""Placement API: where and how a project submits a job, and whether it may right now."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import QueryDict
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.fields import SkipField, get_error_detail
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import ApiToken
from governance.toolkit.api import BAD_FILTER, NOT_FOUND
from queues.selectors.placement import (
    PlacementInputError,
    PreRead,
    Refusal,
    placement_for,
    token_read_placement,
)

MAX_GPUS = 100_000

EXAMPLE_ALLOWED = {
    "project": "vision",
    "gpus": 8,
    "tier": {"slug": "key", "name": "Key project", "scheduler_value": 700, "max_gpus_per_job": 16},
    "tier_given": True,
    "flavor": {"slug": "a100-80g", "name": "A100 80G", "gres_type": "a100"},
    "at": "2026-12-01T06:00:00Z",
    "rules_revision": 42,
    "allowed": True,
    "refusals": [],
    "project_tier": "key",
    "allowed_tiers": ["key", "regular", "exploratory"],
    "headroom": {
        "flavor": "a100-80g",
        "running_gpus": 12,
        "guarantee": 24,
        "maximum": 40,
        "borrow_limit_lifted": False,
        "under_guarantee": 12,
        "under_maximum": 28,
        "within_guarantee": True,
        "changed_by_grants": [],
    },
    "untyped_running_gpus": 0,
    "grants": [],
    "slurm": [
        {
            "cluster": "hpc",
            "slurm_cluster": "hpc",
            "pool": "training",
            "account": "training.vision",
            "qos": "key",
            "partition": "gpu",
            "gres": "gpu:a100:8",
            "guarantee_qos": "training.vision.guarantee",
            "borrow_qos": ["training.borrow.cautious"],
            "default_qos": "key",
            "sbatch_options": [
                "--account=training.vision",
                "--partition=gpu",
                "--qos=key",
                "--gres=gpu:a100:8",
            ],
            "sbatch": "--account=training.vision --partition=gpu --qos=key --gres=gpu:a100:8",
        }
    ],
    "kubernetes": [
        {
            "cluster": "k8s",
            "pool": "training",
            "namespace": "vision",
            "local_queue": "training",
            "cluster_queue": "vision.training",
            "priority_class": "key",
            "labels": {
                "kueue.x-k8s.io/queue-name": "training",
                "kueue.x-k8s.io/priority-class": "key",
            },
            "resources": {"nvidia.com/gpu": "8"},
            "node_selector": {"gpu.example.com/model": "a100"},
        }
    ],
}
EXAMPLE_REFUSED = {
    **EXAMPLE_ALLOWED,
    "gpus": 32,
    "tier": {
        "slug": "production",
        "name": "Production service",
        "scheduler_value": 950,
        "max_gpus_per_job": 16,
    },
    "allowed": False,
    "refusals": [
        {
            "code": "tier_not_allowed",
            "detail": "Project vision may not submit at tier production: its highest tier is key.",
        },
        {
            "code": "over_job_cap",
            "detail": "Tier production allows at most 16 GPUs per job; 32 asked.",
        },
        {
            "code": "over_maximum",
            "detail": "Project vision runs 12 of its maximum 40 a100-80g GPUs: 32 more would "
            "go over it.",
        },
    ],
    "headroom": {**EXAMPLE_ALLOWED["headroom"], "within_guarantee": False},  # type: ignore[dict-item]
    "slurm": [
        {
            **EXAMPLE_ALLOWED["slurm"][0],  # type: ignore[index]
            "qos": "production",
            "gres": "gpu:a100:32",
            "sbatch_options": [
                "--account=training.vision",
                "--partition=gpu",
                "--qos=production",
                "--gres=gpu:a100:32",
            ],
            "sbatch": (
                "--account=training.vision --partition=gpu --qos=production --gres=gpu:a100:32"
            ),
        }
    ],
}


class PlacementApi(APIView):
    """``GET /api/v1/placement/?project=&tier=&gpus=&flavor=`` (the CI pipelines' hot path)."""

    def token_finder(self, request: Request) -> Callable[[str], ApiToken | None] | None:
        """For the token authentication: read the token in the same query as what the answer
        reads per request (the rules' fingerprint, the project, its running GPUs), so that a
        placement costs one query, as the token's authentication alone does. Every check of
        the token is still the authentication's."""
        project = request.query_params.get("project")
        if not project:
            return None  # a 400 follows: nothing to read for it
        flavor = request.query_params.get("flavor")

        def find(prefix: str) -> ApiToken | None:
            found = token_read_placement(prefix=prefix, project=project, flavor=flavor)
            if found is None:
                return None
            token, read = found
            request._request.arbiter_placement_read = read  # type: ignore[attr-defined]
            return token

        return find

    class InputSerializer(serializers.Serializer):
        project = serializers.SlugField(max_length=50, help_text=_("The project's slug."))
        gpus = serializers.IntegerField(
            min_value=1, max_value=MAX_GPUS, help_text=_("GPUs the job asks for.")
        )
        tier = serializers.SlugField(
            max_length=63,
            required=False,
            help_text=_("The tier to submit at; default: the project's effective tier."),
        )
        flavor = serializers.SlugField(
            max_length=63,
            required=False,
            help_text=_("The GPU flavor; may be left out when the project's quotas name one."),
        )

        class Meta:
            ref_name = "PlacementQuery"

    class OutputSerializer(serializers.Serializer):
        class TierSerializer(serializers.Serializer):
            slug = serializers.SlugField()
            name = serializers.CharField()
            scheduler_value = serializers.IntegerField()
            max_gpus_per_job = serializers.IntegerField(allow_null=True)

            class Meta:
                ref_name = "PlacementTier"

        class FlavorSerializer(serializers.Serializer):
            slug = serializers.SlugField()
            name = serializers.CharField()
            gres_type = serializers.CharField(help_text=_("Empty: untyped GPUs."))

            class Meta:
                ref_name = "PlacementFlavor"

        class RefusalSerializer(serializers.Serializer):
            code = serializers.ChoiceField(choices=[(code, code) for code in Refusal.CODES])
            detail = serializers.CharField(help_text=_("In the caller's language."))

            class Meta:
                ref_name = "PlacementRefusal"

        class HeadroomSerializer(serializers.Serializer):
            flavor = serializers.SlugField()
            running_gpus = serializers.FloatField(
                help_text=_(
                    "GPUs of the flavor the project's running jobs hold now (a job on half a "
                    "GPU holds 0.5)."
                )
            )
            guarantee = serializers.IntegerField()
            maximum = serializers.IntegerField(
                help_text=_(
                    "Guarantee plus borrow limit (grants included); the pool's capacity "
                    "when the borrow limit is lifted."
                )
            )
            borrow_limit_lifted = serializers.BooleanField()
            under_guarantee = serializers.FloatField()
            under_maximum = serializers.FloatField()
            within_guarantee = serializers.BooleanField(
                help_text=_("True when this job would still run within the guarantee.")
            )
            changed_by_grants = serializers.ListField(child=serializers.IntegerField())

            class Meta:
                ref_name = "PlacementHeadroom"

        class GrantSerializer(serializers.Serializer):
            id = serializers.IntegerField()
            kind = serializers.CharField()
            starts_at = serializers.DateTimeField()
            ends_at = serializers.DateTimeField()

            class Meta:
                ref_name = "PlacementGrant"

        class SlurmRouteSerializer(serializers.Serializer):
            cluster = serializers.CharField()
            slurm_cluster = serializers.CharField()
            pool = serializers.SlugField()
            account = serializers.CharField()
            qos = serializers.CharField(allow_null=True)
            partition = serializers.CharField(
                allow_null=True,
                help_text=_(
                    "The cluster's Slurm partition (also in the sbatch options); null: the "
                    "cluster's default partition."
                ),
            )
            gres = serializers.CharField()
            guarantee_qos = serializers.CharField(
                allow_null=True, help_text=_("For work within the guarantee.")
            )
            borrow_qos = serializers.ListField(
                child=serializers.CharField(), help_text=_("For work above the guarantee.")
            )
            default_qos = serializers.CharField(allow_null=True)
            sbatch_options = serializers.ListField(child=serializers.CharField())
            sbatch = serializers.CharField(help_text=_("The options as one line."))

            class Meta:
                ref_name = "PlacementSlurmRoute"

        class KueueRouteSerializer(serializers.Serializer):
            cluster = serializers.CharField()
            pool = serializers.SlugField()
            namespace = serializers.CharField()
            local_queue = serializers.CharField()
            cluster_queue = serializers.CharField()
            priority_class = serializers.CharField(allow_null=True)
            labels = serializers.DictField(
                child=serializers.CharField(), help_text=_("Labels to put on the workload.")
            )
            resources = serializers.DictField(child=serializers.CharField())
            node_selector = serializers.DictField(child=serializers.CharField())

            class Meta:
                ref_name = "PlacementKueueRoute"

        project = serializers.SlugField()
        gpus = serializers.IntegerField()
        tier = TierSerializer(allow_null=True)
        tier_given = serializers.BooleanField(
            help_text=_("False: the project's effective tier was used.")
        )
        flavor = FlavorSerializer(allow_null=True)
        at = serializers.DateTimeField()
        rules_revision = serializers.IntegerField(allow_null=True)
        allowed = serializers.BooleanField(help_text=_("Whether the job may run right now."))
        refusals = RefusalSerializer(many=True)
        project_tier = serializers.SlugField(
            allow_null=True, help_text=_("The project's effective tier, grants included.")
        )
        allowed_tiers = serializers.ListField(child=serializers.SlugField())
        headroom = HeadroomSerializer(allow_null=True)
        untyped_running_gpus = serializers.FloatField(
            help_text=_("GPUs of running jobs reported without a flavor.")
        )
        grants = GrantSerializer(many=True, help_text=_("The project's grants in force."))
        slurm = SlurmRouteSerializer(many=True)
        kubernetes = KueueRouteSerializer(many=True)

        class Meta:
            ref_name = "Placement"

    @extend_schema(
        operation_id="placement_retrieve",
        tags=["placement"],
        summary=_("Where and how to submit a job, and whether it may run now"),
        description=_(
            "For each Slurm cluster that serves the project's quota of the flavor: the "
            "account, QOS and the exact sbatch options; for each Kubernetes cluster with "
            "Kueue: the namespace, the LocalQueue and the labels to put on the workload. "
            "'allowed' says whether the job may run right now; each refusal has a code "
            "(tier_not_allowed, tier_retired, over_job_cap, over_maximum, unknown_flavor, "
            "no_quota, no_tier, no_cluster) and a message in the caller's language. The "
            "headroom counts the GPUs of the flavor the project's running jobs hold now "
            "against its guarantee and maximum, grants included, summed over the pools where "
            "it has a quota of that flavor (with quotas of one flavor in several pools, a job "
            "still runs in one of them, within that pool's own limits)."
        ),
        parameters=[InputSerializer],
        responses={
            200: OutputSerializer,
            400: BAD_FILTER,
            404: NOT_FOUND,
        },
        examples=[
            OpenApiExample(
                "Allowed",
                value=EXAMPLE_ALLOWED,
                response_only=True,
                status_codes=["200"],
            ),
            OpenApiExample(
                "Refused",
                value=EXAMPLE_REFUSED,
                response_only=True,
                status_codes=["200"],
            ),
            OpenApiExample(
                "Bad parameters",
                value={
                    "error": "invalid",
                    "detail": "A valid integer is required.",
                    "fields": {"gpus": ["A valid integer is required."]},
                },
                response_only=True,
                status_codes=["400"],
            ),
        ],
    )
    def get(self, request: Request) -> Response:
        data = _parse(request.query_params)
        read: PreRead | None = getattr(request._request, "arbiter_placement_read", None)
        try:
            # The project is checked the way the scoped getter ``project_get`` checks it (a
            # 404 when unknown), in the one query that also reads the fingerprint.
            answer = placement_for(
                user=request.user,
                project=data["project"],
                gpus=data["gpus"],
                tier=data.get("tier"),
                flavor=data.get("flavor"),
                read=read,
            )
        except PlacementInputError as error:
            raise ValidationError({k: [v] for k, v in error.errors.items()}) from None
        # ``answer`` is already shaped as OutputSerializer (tests check it field by field);
        # rendering it as is spares the hot path the serializer's per-field work.
        return Response(answer)


@functools.cache
def _input_fields(language: str | None) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
    """``InputSerializer``'s fields, bound once per language (a serializer deep-copies its
    fields each time it is made, a cost the hot path does not pay; a field's min/max message
    is formatted once, in the language active then)."""
    return dict(PlacementApi.InputSerializer().fields)


FIELD_NAMES = tuple(PlacementApi.InputSerializer._declared_fields)


def _parse(params: Any) -> dict[str, Any]:
    """What ``InputSerializer(data=params).is_valid(raise_exception=True)`` gives, field by
    field with the same fields, messages and 400 (the serializer has no cross-field rules).

    A field reads only its own parameter's last value (or its absence), so a valid question
    is read once per process (``_parse_valid``, bounded): pipelines ask the same few questions
    over and over, and reading them again cost the hot path a tenth of a millisecond."""
    key = tuple(params.get(name) for name in FIELD_NAMES)
    return dict(_parse_valid(key))


@functools.lru_cache(maxsize=4096)
def _parse_valid(key: tuple[str | None, ...]) -> dict[str, Any]:
    """The fields read from the parameters ``key`` names (``FIELD_NAMES``' last values;
    ``None``: absent). A 400 is raised, never kept, so its messages follow each caller's
    language; a valid answer holds no text to translate."""
    params = QueryDict(mutable=True)
    for name, value in zip(FIELD_NAMES, key, strict=True):
        if value is not None:
            params[name] = value
    data: dict[str, Any] = {}
    errors: dict[str, Any] = {}
    for name, field in _input_fields(get_language()).items():
        try:
            value = field.run_validation(field.get_value(params))
        except ValidationError as error:
            errors[name] = error.detail
        except DjangoValidationError as error:
            errors[name] = get_error_detail(error)
        except SkipField:
            continue
        else:
            data[name] = value
    if errors:
        raise ValidationError(errors)
    return data
