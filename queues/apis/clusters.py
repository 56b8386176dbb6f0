"""The cluster API (ops only): clusters, their sync state and drift, their connection check.

Creating (``POST /clusters/``), editing (``PATCH``) and deleting (``DELETE``) a cluster
propose a rule change, answered with the change (201); another ops user approves and applies
it through the change endpoints. Reading a cluster runs no scheduler command.
"""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import (
    OpenApiExample,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import Pool
from governance.toolkit.api import (
    NOT_FOUND,
    LimitOffsetPagination,
    captured_example,
    change_example,
    get_paginated_response,
)
from governance.toolkit.changes import BAD_INPUT, change_response
from queues import selectors, services
from queues.models import (
    ClusterBackend,
)

from .cluster_serializers import (
    CLUSTER_EXAMPLE,
    FORBIDDEN,
    PROPOSED,
    ChangeMetaInputSerializer,
    SyncRunOutputSerializer,
    _change_kwargs,
    _settings_fields,
)


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

    class InputSerializer(ChangeMetaInputSerializer):
        name = serializers.SlugField(max_length=63)
        backend = serializers.ChoiceField(
            choices=ClusterBackend.choices, default=ClusterBackend.SLURM
        )

        def get_fields(self) -> dict[str, serializers.Field]:
            fields = super().get_fields()
            fields.update(_settings_fields(partial=False))
            return fields

        class Meta:
            ref_name = "ClusterCreateInput"

    @extend_schema(
        operation_id="clusters_list",
        examples=[captured_example("clusters_list")],
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

    @extend_schema(
        operation_id="clusters_create",
        examples=[change_example()],
        tags=["clusters"],
        summary=_("Propose a new cluster (a rule change another ops user approves)"),
        request=InputSerializer,
        responses={201: PROPOSED, 400: BAD_INPUT, 403: FORBIDDEN},
    )
    def post(self, request: Request) -> Response:
        selectors.require_cluster_access(request.user)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        meta = _change_kwargs(data)
        reason = data.pop("reason")
        change = services.cluster_propose_create(
            user=request.user,  # type: ignore[arg-type]
            reason=reason,
            data=data,
            **meta,
        )
        return change_response(change, status_code=status.HTTP_201_CREATED)


class ClusterDetailApi(APIView):
    class OutputSerializer(serializers.Serializer):
        name = serializers.SlugField(source="cluster.name")
        backend = serializers.CharField(source="cluster.backend")
        slurm_cluster = serializers.CharField(source="cluster.slurm_cluster")
        slurm_partition = serializers.CharField(source="cluster.slurm_partition")
        slurm_conf = serializers.CharField(source="cluster.slurm_conf")
        slurm_bin_dir = serializers.CharField(source="cluster.slurm_bin_dir")
        command_timeout = serializers.IntegerField(source="cluster.command_timeout")
        kube_api_server = serializers.CharField(source="cluster.kube_api_server")
        kube_ca_bundle = serializers.CharField(source="cluster.kube_ca_bundle")
        kube_credentials_file = serializers.CharField(source="cluster.kube_credentials_file")
        kube_namespace_template = serializers.CharField(source="cluster.kube_namespace_template")
        submit_table_delivery = serializers.CharField(source="cluster.submit_table_delivery")
        submit_table_lapse = serializers.CharField(source="cluster.submit_table_lapse")
        agent_fetched_at = serializers.DateTimeField(
            source="state.agent_fetched_at",
            allow_null=True,
            help_text=_("When the pull agent last fetched the submit table (pulled tables)."),
        )
        agent_fetch = serializers.DictField(
            source="state.agent_fetch",
            help_text=_("The agent's last fetch: host, plugin version, status, table it got."),
        )
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
        reachable = serializers.BooleanField(
            source="live.reachable",
            allow_null=True,
            help_text=_("What the last check found (null: never checked). Reading runs nothing."),
        )
        error = serializers.CharField(
            source="live.error", help_text=_("Why the scheduler could not be reached, if not.")
        )
        checked_at = serializers.DateTimeField(source="live.checked_at", allow_null=True)
        scheduler_version = serializers.CharField(source="live.version")
        tracked_resources = serializers.ListField(
            source="live.tracked_resources", child=serializers.CharField()
        )
        drift_checked_at = serializers.DateTimeField(
            source="live.drift_checked_at", allow_null=True
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

    class UpdateInputSerializer(ChangeMetaInputSerializer):
        def get_fields(self) -> dict[str, serializers.Field]:
            fields = super().get_fields()
            fields.update(_settings_fields(partial=True))
            return fields

        class Meta:
            ref_name = "ClusterUpdateInput"

    class DeleteInputSerializer(ChangeMetaInputSerializer):
        class Meta:
            ref_name = "ClusterDeleteInput"

    @extend_schema(
        operation_id="clusters_retrieve",
        examples=[OpenApiExample("A Slurm cluster", response_only=True, value=CLUSTER_EXAMPLE)],
        tags=["clusters"],
        summary=_("Show a cluster: settings, last check, sync due, drift, recent runs"),
        responses={200: OutputSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, name: str) -> Response:
        cluster = selectors.cluster_get(user=request.user, name=name)
        state = selectors.sync_state(cluster)
        data = {
            "cluster": cluster,
            "state": state,
            "sync_due": selectors.sync_due(cluster, state=state),
            "live": selectors.cluster_live_status(cluster=cluster, state=state),
            "slurm_conf_lines": selectors.slurm_conf_suggestion(),
            "runs": selectors.sync_run_list(cluster=cluster)[:10],
        }
        return Response(self.OutputSerializer(data).data)

    @extend_schema(
        operation_id="clusters_partial_update",
        examples=[change_example()],
        tags=["clusters"],
        summary=_("Propose a change of a cluster's settings, pools or enabled state"),
        request=UpdateInputSerializer,
        responses={201: PROPOSED, 400: BAD_INPUT, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def patch(self, request: Request, name: str) -> Response:
        cluster = selectors.cluster_get(user=request.user, name=name)
        serializer = self.UpdateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        meta = _change_kwargs(data)
        reason = data.pop("reason")
        change = services.cluster_propose_update(
            cluster=cluster,
            user=request.user,  # type: ignore[arg-type]
            reason=reason,
            data=data,
            **meta,
        )
        return change_response(change, status_code=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="clusters_destroy",
        examples=[change_example()],
        tags=["clusters"],
        summary=_("Propose deleting a cluster"),
        request=DeleteInputSerializer,
        responses={201: PROPOSED, 400: BAD_INPUT, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def delete(self, request: Request, name: str) -> Response:
        cluster = selectors.cluster_get(user=request.user, name=name)
        serializer = self.DeleteInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        meta = _change_kwargs(data)
        change = services.cluster_propose_delete(
            cluster=cluster,
            user=request.user,  # type: ignore[arg-type]
            reason=data["reason"],
            **meta,
        )
        return change_response(change, status_code=status.HTTP_201_CREATED)


class ClusterCheckApi(APIView):
    class OutputSerializer(serializers.Serializer):
        queued = serializers.BooleanField(
            help_text=_("False when a check asked for in the last minute is still waiting.")
        )

        class Meta:
            ref_name = "ClusterCheckQueued"

    @extend_schema(
        operation_id="clusters_check",
        examples=[
            OpenApiExample(
                "Queued", response_only=True, value={"queued": True}, status_codes=["202"]
            )
        ],
        tags=["clusters"],
        summary=_("Check the connection now (queued for a worker; the cluster shows the result)"),
        request=None,
        responses={202: OutputSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, name: str) -> Response:
        cluster = selectors.cluster_get(user=request.user, name=name)
        queued = services.cluster_check_enqueue(cluster=cluster)
        return Response(self.OutputSerializer({"queued": queued}).data, status=202)
