"""The cluster API (ops only): clusters, their sync state and drift, sync now or dry run."""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.apis import get_paginated_response
from governance.apis._common import NOT_FOUND, LimitOffsetPagination
from governance.models import Pool
from queues import selectors, services
from queues.models import SyncTrigger

FORBIDDEN = OpenApiResponse(description=_("Only ops may see and sync clusters."))


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


class ClusterListApi(APIView):
    pagination_class = LimitOffsetPagination

    class OutputSerializer(serializers.Serializer):
        name = serializers.SlugField()
        backend = serializers.CharField()
        slurm_cluster = serializers.CharField()
        enabled = serializers.BooleanField()
        pools = serializers.SlugRelatedField(
            slug_field="slug", many=True, queryset=Pool.objects.all()
        )
        applied_revision = serializers.IntegerField(
            source="sync_state.applied_revision_id", allow_null=True, default=None
        )
        latest_run_status = serializers.CharField(allow_null=True)

        class Meta:
            ref_name = "ClusterListItem"

    @extend_schema(
        operation_id="clusters_list",
        tags=["clusters"],
        summary=_("List clusters"),
        responses={200: OutputSerializer(many=True), 403: FORBIDDEN},
    )
    def get(self, request: Request) -> Response:
        selectors.require_cluster_access(request.user)
        return get_paginated_response(
            serializer_class=self.OutputSerializer,
            queryset=selectors.cluster_list(),
            request=request,
            view=self,
        )


class ClusterDetailApi(APIView):
    class OutputSerializer(serializers.Serializer):
        name = serializers.SlugField(source="cluster.name")
        backend = serializers.CharField(source="cluster.backend")
        slurm_cluster = serializers.CharField(source="cluster.slurm_cluster")
        slurm_conf = serializers.CharField(source="cluster.slurm_conf")
        command_prefix = serializers.CharField(source="cluster.command_prefix")
        enabled = serializers.BooleanField(source="cluster.enabled")
        pools = serializers.SlugRelatedField(
            source="cluster.pools", slug_field="slug", many=True, queryset=Pool.objects.all()
        )
        sync_due = serializers.BooleanField(
            help_text=_("True until the cluster has applied the newest rules revision.")
        )
        applied_revision = serializers.IntegerField(
            source="state.applied_revision_id", allow_null=True
        )
        applied_at = serializers.DateTimeField(source="state.applied_at", allow_null=True)
        reachable = serializers.BooleanField(source="live.reachable")
        error = serializers.CharField(
            source="live.error", help_text=_("Why Slurm could not be reached, if it could not.")
        )
        drift = inline_serializer(
            name="DriftItem",
            many=True,
            source="live.drift",
            fields={
                "kind": serializers.CharField(),
                "name": serializers.CharField(),
                "field": serializers.CharField(),
                "applied": serializers.CharField(),
                "live": serializers.CharField(),
            },
        )
        slurm_conf_lines = serializers.ListField(child=serializers.CharField())
        runs = SyncRunOutputSerializer(many=True)

        class Meta:
            ref_name = "ClusterDetail"

    @extend_schema(
        operation_id="clusters_retrieve",
        tags=["clusters"],
        summary=_("Show a cluster: sync due, live drift, recent runs"),
        responses={200: OutputSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, name: str) -> Response:
        cluster = selectors.cluster_get(user=request.user, name=name)
        data = {
            "cluster": cluster,
            "state": selectors.sync_state(cluster),
            "sync_due": selectors.sync_due(cluster),
            "live": selectors.cluster_live_status(cluster=cluster),
            "slurm_conf_lines": selectors.slurm_conf_suggestion(),
            "runs": selectors.sync_run_list(cluster=cluster)[:10],
        }
        return Response(self.OutputSerializer(data).data)


class ClusterSyncApi(APIView):
    class InputSerializer(serializers.Serializer):
        dry_run = serializers.BooleanField(
            default=False,
            help_text=_("Plan only, here and now; otherwise the sync is queued for a worker."),
        )

        class Meta:
            ref_name = "ClusterSyncInput"

    @extend_schema(
        operation_id="clusters_sync",
        tags=["clusters"],
        summary=_("Sync a cluster now, or dry run"),
        request=InputSerializer,
        responses={
            200: SyncRunOutputSerializer,
            202: SyncRunOutputSerializer,
            400: OpenApiResponse(description=_("Invalid input.")),
            403: FORBIDDEN,
            404: NOT_FOUND,
        },
    )
    def post(self, request: Request, name: str) -> Response:
        cluster = selectors.cluster_get(user=request.user, name=name)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        if serializer.validated_data["dry_run"]:
            run = services.sync_now(cluster=cluster, user=request.user, dry_run=True)
            return Response(SyncRunOutputSerializer(run).data)
        run = services.sync_enqueue(cluster=cluster, trigger=SyncTrigger.MANUAL, user=request.user)
        return Response(SyncRunOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class SyncRunDetailApi(APIView):
    @extend_schema(
        operation_id="clusters_runs_retrieve",
        tags=["clusters"],
        summary=_("Show a sync run with its plan and progress"),
        responses={200: SyncRunOutputSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, name: str, pk: int) -> Response:
        cluster = selectors.cluster_get(user=request.user, name=name)
        run = selectors.sync_run_get(user=request.user, cluster=cluster, pk=pk)
        return Response(SyncRunOutputSerializer(run).data)


from .workload import JobWaitApi, WorkloadEventIngestApi  # noqa: E402

__all__ = [
    "ClusterDetailApi",
    "ClusterListApi",
    "ClusterSyncApi",
    "JobWaitApi",
    "SyncRunDetailApi",
    "WorkloadEventIngestApi",
]
