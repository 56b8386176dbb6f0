"""The sync API (ops only, a token with the ``sync`` scope): sync a cluster now or dry run,
and read a sync run with its plan and progress."""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import TokenScope
from governance.selectors import signed_in_user
from governance.toolkit.api import NOT_FOUND
from governance.toolkit.changes import BAD_INPUT
from queues import selectors, services
from queues.models import SyncTrigger

from .clusters import FORBIDDEN, SYNC_RUN_EXAMPLE, SyncRunOutputSerializer


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
        run = selectors.sync_run_get(user=request.user, cluster=cluster, pk=pk)
        return Response(SyncRunOutputSerializer(run).data)
