"""Workload evidence API: bulk event ingest, and why one job waits."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import TokenScope
from governance.toolkit.api import NOT_FOUND, body_read, error_response
from queues import selectors
from queues.models import FINISHED_STATES, EventKind, JobState
from queues.schedulers.classify import SCHEDULERS
from queues.services.slurm.waits import job_live_wait
from queues.services.workload import events_ingest
from queues.services.workload.events import EventItemsInvalid, job_events_from_items
from queues.services.workload.positions import quota_positions

MAX_EVENTS = 10_000
# The body of a batch: 10,000 events of about 400 bytes each, with room for long messages
# (the site's DATA_UPLOAD_MAX_MEMORY_SIZE, 2.5 MB, holds about 6,000).
MAX_BODY_BYTES = 16 * 1024 * 1024


def per_item(errors: Any, count: int) -> list[Any]:
    """One error object per item, ``{}`` for the good ones (DRF may give a dict by index)."""
    if isinstance(errors, dict):
        return [errors.get(str(i)) or errors.get(i) or {} for i in range(count)]  # type: ignore[call-overload]
    return [error or {} for error in errors]


class WorkloadEventIngestApi(APIView):
    required_scope = TokenScope.INGEST  # a token needs "ingest" (contract A)

    class EventSerializer(serializers.Serializer):
        event_id = serializers.CharField(
            max_length=200,
            help_text=gettext_lazy("Unique per source: sending it again is a no-op."),
        )
        source = serializers.CharField(  # type: ignore[assignment]
            max_length=100,
            required=False,
            default="",
            help_text=gettext_lazy("Where the job lives; defaults to the cluster's name."),
        )
        cluster = serializers.SlugField(max_length=63, required=False, default="")
        scheduler = serializers.ChoiceField(
            choices=SCHEDULERS,
            help_text=gettext_lazy("Whose reason strings these are (decides the classifier)."),
        )
        job_id = serializers.CharField(max_length=200)
        time = serializers.DateTimeField()
        kind = serializers.ChoiceField(choices=EventKind.choices)
        state = serializers.ChoiceField(
            choices=JobState.choices,
            required=False,
            default="",
            allow_blank=True,
            help_text=gettext_lazy("Required for `ended`: the final state."),
        )
        reason = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)
        message = serializers.CharField(
            max_length=4000, required=False, default="", allow_blank=True
        )
        project = serializers.SlugField(required=False, default="", allow_blank=True)
        tier = serializers.SlugField(required=False, default="", allow_blank=True)
        flavor = serializers.SlugField(required=False, default="", allow_blank=True)
        gpus = serializers.DecimalField(
            max_digits=9,
            decimal_places=3,
            min_value=Decimal(0),
            max_value=Decimal(100_000),
            coerce_to_string=False,
            required=False,
            help_text=gettext_lazy("GPUs asked for; a fraction for a share of one GPU (0.25)."),
        )
        name = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)
        user = serializers.CharField(max_length=150, required=False, default="", allow_blank=True)
        queue = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)
        qos = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)
        account = serializers.CharField(
            max_length=200, required=False, default="", allow_blank=True
        )
        constraints = serializers.CharField(
            max_length=500, required=False, default="", allow_blank=True
        )
        submitted_at = serializers.DateTimeField(required=False)
        eligible_at = serializers.DateTimeField(required=False)
        exit_code = serializers.CharField(
            max_length=32, required=False, default="", allow_blank=True
        )

        class Meta:
            ref_name = "WorkloadEventInput"

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if not attrs.get("source") and not attrs.get("cluster"):
                raise serializers.ValidationError(
                    {"source": [_("Name the source or the cluster of the job.")]}
                )
            if attrs["kind"] == EventKind.ENDED and attrs.get("state") not in FINISHED_STATES:
                raise serializers.ValidationError(
                    {"state": [_("An ended event needs its final state (completed, failed…).")]}
                )
            return attrs

    class InputSerializer(serializers.Serializer):
        events = serializers.ListField(
            child=serializers.DictField(), min_length=1, max_length=MAX_EVENTS
        )

        class Meta:
            ref_name = "WorkloadEventBatch"

    class OutputSerializer(serializers.Serializer):
        received = serializers.IntegerField()
        stored = serializers.IntegerField()
        duplicates = serializers.IntegerField(
            help_text=gettext_lazy("Events whose id was already stored (not stored again).")
        )
        rejected = serializers.IntegerField(
            help_text=gettext_lazy(
                "Events that contradict what is known of their job (for example a start after "
                "the job ended): not stored, listed in errors."
            )
        )
        jobs_created = serializers.IntegerField()
        jobs_updated = serializers.IntegerField()
        unclassified = serializers.IntegerField()
        by_category = serializers.DictField(child=serializers.IntegerField())
        errors = serializers.ListField(  # type: ignore[assignment]
            child=serializers.DictField(child=serializers.CharField()),
            help_text=gettext_lazy("Up to 50 rejected events: source, event_id and error."),
        )

        class Meta:
            ref_name = "WorkloadIngestResult"

    @extend_schema(
        operation_id="workload_events_ingest",
        examples=[
            OpenApiExample(
                "A pod that cannot be scheduled",
                request_only=True,
                value={
                    "events": [
                        {
                            "event_id": "k8s-ev-9f2c",
                            "source": "k8s",
                            "job_id": "vision/train-42",
                            "kind": "pending",
                            "time": "2026-12-01T08:00:00Z",
                            "scheduler": "kueue",
                            "reason": "QuotaReserved",
                            "message": "couldn't assign flavors to pod set main",
                            "project": "vision",
                            "gpus": 8,
                            "flavor": "a100-80g",
                        }
                    ]
                },
            ),
            OpenApiExample(
                "Stored",
                response_only=True,
                value={
                    "received": 1,
                    "stored": 1,
                    "duplicates": 0,
                    "jobs_created": 1,
                    "jobs_updated": 0,
                    "unclassified": 0,
                    "by_category": {"quota": 1},
                },
            ),
        ],
        tags=["workload"],
        summary=gettext_lazy("Report workload events in bulk (idempotent per event id)"),
        description=gettext_lazy(
            "Up to 10,000 events of any scheduler (Slurm, Kueue Workload conditions, pod "
            "FailedScheduling events) in a body of up to 16 MiB (a larger body is a 413 that "
            "names the limit). All or nothing: when any item is invalid the answer is "
            "400 with one error object per item (empty for good items) and nothing is stored. "
            "Open to ops and to accounts given the permission “Can add job event”."
        ),
        request=inline_serializer(
            name="WorkloadEventBatchInput",
            fields={"events": EventSerializer(many=True)},
        ),
        responses={
            200: OutputSerializer,
            400: error_response(gettext_lazy("Invalid body or items.")),
            403: error_response(gettext_lazy("No right to report events.")),
            413: error_response(gettext_lazy("The body is over the endpoint's limit.")),
        },
    )
    def post(self, request: Request) -> Response:
        user = request.user
        if not (getattr(user, "is_ops", False) or user.has_perm("queues.add_workloadevent")):
            raise PermissionDenied(_("Only ops and accounts allowed to report events may."))
        body_read(request, limit=MAX_BODY_BYTES)
        batch = self.InputSerializer(data=request.data)
        batch.is_valid(raise_exception=True)
        items = self.EventSerializer(data=batch.validated_data["events"], many=True)
        if not items.is_valid():
            raise ValidationError(
                {"events": per_item(items.errors, len(batch.validated_data["events"]))}
            )
        try:
            events = job_events_from_items(list(items.validated_data))
        except EventItemsInvalid as invalid:
            raise ValidationError({"events": invalid.errors}) from None
        result = events_ingest(events=events, position_for=quota_positions())
        return Response(self.OutputSerializer(result.as_dict()).data)


class JobWaitApi(APIView):
    class OutputSerializer(serializers.Serializer):
        source = serializers.CharField(source="job.source")  # type: ignore[assignment]
        job_id = serializers.CharField(source="job.job_id")
        project = serializers.SlugField(source="job.project.slug", allow_null=True, default=None)
        tier = serializers.SlugField(source="job.tier.slug", allow_null=True, default=None)
        user = serializers.CharField(source="job.user_name")
        state = serializers.CharField(source="job.state")
        gpus = serializers.FloatField(source="job.gpus")
        flavor = serializers.SlugField(source="job.flavor.slug", allow_null=True, default=None)
        constraints = serializers.CharField(source="job.constraints")
        queue = serializers.CharField(source="job.queue")
        qos = serializers.CharField(source="job.qos")
        account = serializers.CharField(source="job.account")
        submitted_at = serializers.DateTimeField(source="job.submitted_at", allow_null=True)
        reason = serializers.CharField(source="job.reason")
        message = serializers.CharField(source="job.message")
        category = serializers.CharField(
            help_text=gettext_lazy(
                "resource, quota, queue_rule, dependency, placement, unclassified, or unknown "
                "when the figures support no reason (the raw reason is in reason); empty when "
                "the job is not pending."
            )
        )
        category_label = serializers.CharField()
        category_text = serializers.CharField()
        clears_by_itself = serializers.BooleanField(allow_null=True)
        waited_seconds = serializers.IntegerField(
            help_text=gettext_lazy(
                "The job's wait: its first wait, from the submit to its first start (or to its "
                "end when it never started; to now while it still waits)."
            )
        )
        current_wait_seconds = serializers.IntegerField(
            allow_null=True,
            help_text=gettext_lazy(
                "Its current wait: seconds pending since it last became pending (the submit or "
                "the last requeue); null unless it is pending."
            ),
        )
        never_started = serializers.BooleanField(
            help_text=gettext_lazy("The job ended (cancelled, failed) without ever starting.")
        )
        next_step = serializers.CharField()
        action_url = serializers.CharField()
        quota = serializers.SerializerMethodField()
        jobs_ahead = serializers.ListField(
            source="ahead",
            child=serializers.DictField(),
            help_text=gettext_lazy(
                "The first 20 pending jobs that compete for the same flavor and pool, could "
                "start and rank ahead (job_id, tier, tier_name, gpus)."
            ),
        )
        jobs_ahead_count = serializers.IntegerField(
            source="ahead_count", help_text=gettext_lazy("How many such jobs, all of them.")
        )
        limit = serializers.CharField(
            help_text=gettext_lazy(
                "The limit that holds the job: project_quota, tier_cap, user_cap, per_job, "
                "association_limit, pool_capacity, jobs_ahead, hold, begin_time, dependency, "
                "constraint, queue_rule; empty when unknown or not pending."
            )
        )
        figures = serializers.DictField(
            child=serializers.CharField(),
            help_text=gettext_lazy(
                "The figures that make the answer true (used, limit, asked, capacity, "
                "running, free, ahead, ahead_gpus), read from the job's own source now."
            ),
        )
        holders = serializers.ListField(
            child=serializers.DictField(),
            help_text=gettext_lazy("Who uses the limit: project and GPUs."),
        )

        class Meta:
            ref_name = "JobWait"

        def get_quota(self, obj: Any) -> list[dict[str, Any]]:
            return [
                {
                    "flavor": use.flavor.slug if use.flavor else None,
                    "guarantee": use.guarantee,
                    "maximum": use.maximum,
                    "running": use.running,
                    "pending": use.pending,
                }
                for use in obj.use
            ]

    @extend_schema(
        operation_id="jobs_wait_retrieve",
        examples=[
            OpenApiExample(
                "Waiting on its quota",
                response_only=True,
                value={
                    "source": "hpc",
                    "job_id": "48213",
                    "project": "vision",
                    "tier": "key",
                    "user": "member",
                    "state": "pending",
                    "gpus": 8,
                    "flavor": "a100-80g",
                    "constraints": "",
                    "queue": "gpu",
                    "qos": "key",
                    "account": "training.vision",
                    "submitted_at": "2026-12-01T07:40:00Z",
                    "reason": "QOSGrpGRES",
                    "message": "",
                    "category": "quota",
                    "category_label": "Quota limit",
                    "category_text": "The project uses all the GPUs its quota allows.",
                    "clears_by_itself": True,
                    "waited_seconds": 1200,
                    "current_wait_seconds": 1200,
                    "never_started": False,
                    "next_step": "Wait for the project's running jobs to end, or ask for more.",
                    "action_url": "/requests/new/?project=vision&kind=quota_exception",
                    "quota": None,
                    "jobs_ahead": [],
                    "jobs_ahead_count": 0,
                    "limit": "project_quota",
                    "figures": {"used": "40", "limit": "40", "asked": "8"},
                    "holders": [{"project": "Vision", "gpus": "40"}],
                },
            )
        ],
        tags=["workload"],
        summary=gettext_lazy("Why is this job waiting: category, evidence and next step"),
        parameters=[
            OpenApiParameter(
                "source",
                str,
                description=gettext_lazy("The cluster or source, when job ids repeat."),
            )
        ],
        responses={200: OutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, job_id: str) -> Response:
        job = selectors.job_get(
            user=request.user, job_id=job_id, source=request.query_params.get("source", "")
        )
        explanation = selectors.job_wait_explanation(job, live=job_live_wait(job))
        return Response(self.OutputSerializer(explanation).data)
