"""The sync API (ops only, a token with the ``sync`` scope): sync a cluster now or dry run,
and read a sync run with its plan and progress."""

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.utils.translation import gettext_lazy as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import ApiToken, TokenScope
from governance.selectors import signed_in_user
from governance.toolkit.api import NOT_FOUND
from governance.toolkit.changes import BAD_INPUT
from governance.toolkit.client import client_address
from queues import selectors, services
from queues.models import Cluster, SyncTrigger

from .cluster_serializers import FORBIDDEN, SYNC_RUN_EXAMPLE, SyncRunOutputSerializer


def _refuse_other_agents(request: Request, cluster: Cluster) -> None:
    """A token bound to another cluster's pull agent acts on that cluster only."""
    problem = selectors.agent_token_elsewhere(token=request.auth, cluster=cluster)
    if problem:
        raise PermissionDenied(problem)


class ClusterSyncApi(APIView):
    required_scope = TokenScope.SYNC  # a token needs "sync" (contract A)

    class InputSerializer(serializers.Serializer):
        dry_run = serializers.BooleanField(
            default=False,
            help_text=_("Plan only, here and now; otherwise the sync is queued for a worker."),
        )

        class Meta:
            ref_name = "ClusterSyncInput"

    @extend_schema(
        operation_id="clusters_sync",
        examples=[
            OpenApiExample("Sync now", request_only=True, value={"dry_run": False}),
            OpenApiExample("The run", response_only=True, value=SYNC_RUN_EXAMPLE),
        ],
        tags=["clusters"],
        summary=_("Sync a cluster now, or dry run"),
        request=InputSerializer,
        responses={
            200: SyncRunOutputSerializer,
            202: SyncRunOutputSerializer,
            400: BAD_INPUT,
            403: FORBIDDEN,
            404: NOT_FOUND,
        },
    )
    def post(self, request: Request, name: str) -> Response:
        cluster = selectors.cluster_get(user=request.user, name=name)
        _refuse_other_agents(request, cluster)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        if serializer.validated_data["dry_run"]:
            run = services.sync_now(cluster=cluster, user=signed_in_user(request), dry_run=True)
            return Response(SyncRunOutputSerializer(run).data)
        run = services.sync_enqueue(
            cluster=cluster, trigger=SyncTrigger.MANUAL, user=signed_in_user(request)
        )
        return Response(SyncRunOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class SyncRunDetailApi(APIView):
    required_scope = TokenScope.SYNC

    @extend_schema(
        operation_id="clusters_runs_retrieve",
        examples=[OpenApiExample("A finished run", response_only=True, value=SYNC_RUN_EXAMPLE)],
        tags=["clusters"],
        summary=_("Show a sync run with its plan and progress"),
        responses={200: SyncRunOutputSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, name: str, pk: int) -> Response:
        cluster = selectors.cluster_get(user=request.user, name=name)
        _refuse_other_agents(request, cluster)
        run = selectors.sync_run_get(user=request.user, cluster=cluster, pk=pk)
        return Response(SyncRunOutputSerializer(run).data)


class SubmitTableApi(APIView):
    """The cluster's job_submit table for its pull agent (deploy/slurm-agent): the bytes the
    sync renders, as they are, with an ETag; ``If-None-Match`` with the table the agent holds
    answers 304. Each fetch is recorded (the cluster page shows the agent's last one). Only a
    token bound to the cluster gets its table (``manage.py agent_token_create``)."""

    required_scope = TokenScope.SYNC  # a token needs "sync", and a session is refused

    @extend_schema(
        operation_id="clusters_submit_table_retrieve",
        tags=["clusters"],
        summary=_("The cluster's job_submit table, for the pull agent on its controller"),
        examples=[
            OpenApiExample(
                "A table",
                response_only=True,
                media_type="text/x-lua",
                value=(
                    "-- arbiter-submit-table format=1 fingerprint=3f9c2a1b7d4e8f60 "
                    "expires=1764576000\n-- Written by Arbiter's Slurm sync; read by "
                    "job_submit.lua. Do not edit.\nreturn {\n  ...\n}\n"
                ),
            )
        ],
        parameters=[
            OpenApiParameter("If-None-Match", str, OpenApiParameter.HEADER, required=False),
            OpenApiParameter("X-Arbiter-Agent-Host", str, OpenApiParameter.HEADER, required=False),
            OpenApiParameter(
                "X-Arbiter-Plugin-Version", str, OpenApiParameter.HEADER, required=False
            ),
        ],
        responses={
            (200, "text/x-lua"): OpenApiTypes.STR,
            304: None,
            400: BAD_INPUT,
            403: FORBIDDEN,
            404: NOT_FOUND,
        },
    )
    def get(self, request: Request, name: str) -> HttpResponse:
        if not isinstance(request.auth, ApiToken):
            raise PermissionDenied(_("Only an API token with the “sync” scope fetches the table."))
        cluster = selectors.cluster_get(user=request.user, name=name)
        # A token bound to this cluster only (ClusterAgentToken): one per controller.
        problem = selectors.agent_token_problem(token=request.auth, cluster=cluster)
        if problem:
            raise PermissionDenied(problem)
        etag = request.headers.get("If-None-Match", "")
        current = selectors.sync_state(cluster).submit_table
        unchanged = bool(current) and etag == services.table_etag(current)
        try:
            state = services.submit_table_fetch(
                cluster=cluster,
                host=request.headers.get("X-Arbiter-Agent-Host", ""),
                plugin_version=request.headers.get("X-Arbiter-Plugin-Version", ""),
                address=client_address(request) or "",
                status=304 if unchanged else 200,
            )
        except ValidationError as error:
            raise serializers.ValidationError({"cluster": error.messages}) from None
        tag = services.table_etag(state.submit_table)
        if etag == tag:
            response = HttpResponse(status=304)
        else:
            response = HttpResponse(
                state.submit_table.encode("utf-8"), content_type="text/x-lua; charset=utf-8"
            )
        response["ETag"] = tag
        response["Cache-Control"] = "no-store"
        return response
