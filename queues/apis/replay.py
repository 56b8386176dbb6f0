"""A rule change's what-if replay: ``POST /changes/<id>/replay/`` queues one (202 with the
run; the same inputs reuse their run), ``GET`` reads the latest. The change is read through
its one scoped getter (``governance.selectors.rule_change_get``)."""

from __future__ import annotations

from django.http import Http404
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.selectors import rule_change_get, signed_in_user
from governance.toolkit.api import BAD_INPUT, FORBIDDEN, NOT_FOUND, error_response
from queues import selectors, services
from queues.models import ChangeReplay

NOT_REPLAYED = error_response(
    _("No such change, not one you may see, or never replayed."),
    example={"error": "not_found", "detail": "This change has not been replayed.", "fields": {}},
)

REPLAY_EXAMPLE = {
    "id": 7,
    "change": 12,
    "status": "running",
    "progress": 55,
    "fingerprint": "5f0c…",
    "inputs": {
        "rules_revision": 88,
        "change": 12,
        "edits": [["prioritytier", 3, "max_gpus_total", None, 8]],
        "start": "2026-10-31T00:00:00+00:00",
        "end": "2026-11-30T00:00:00+00:00",
    },
    "result": None,
    "error": "",
    "created_at": "2026-11-30T09:12:03Z",
    "started_at": "2026-11-30T09:12:04Z",
    "finished_at": None,
    "page": "/changes/12/replay/",
}


class ChangeReplayOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    change = serializers.IntegerField(source="change_id")
    status = serializers.CharField(help_text=_("queued, running, done or failed"))
    progress = serializers.IntegerField(help_text=_("0–100"))
    fingerprint = serializers.CharField(
        help_text=_("SHA-256 of the inputs: the rules revision, the change's edits, the window.")
    )
    inputs = serializers.JSONField()
    result = serializers.JSONField(
        allow_null=True,
        help_text=_(
            "When done: the window, the jobs replayed and skipped, the edited fields a replay "
            "does not model, and per side ('in_force' and 'with_change') the capacity and "
            "quotas it ran under. The monthly review's figures of both sides are at "
            "/api/v1/changes/<id>/replay/figures/."
        ),
    )
    error = serializers.CharField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    page = serializers.SerializerMethodField()

    class Meta:
        ref_name = "ChangeReplay"

    def get_page(self, run: ChangeReplay) -> str:
        return reverse("change_replay", args=[run.change_id])


class ChangeReplayApi(APIView):
    """Start a replay of a change (POST) or read its latest (GET)."""

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "ChangeReplayInput"

    @extend_schema(
        operation_id="changes_replay_retrieve",
        tags=["changes"],
        summary=_("Read the latest replay of a rule change"),
        examples=[OpenApiExample("A running replay", response_only=True, value=REPLAY_EXAMPLE)],
        responses={200: ChangeReplayOutputSerializer, 403: FORBIDDEN, 404: NOT_REPLAYED},
    )
    def get(self, request: Request, pk: int) -> Response:
        change = rule_change_get(user=request.user, pk=pk)
        run = selectors.change_replay_latest(change=change)
        if run is None:
            raise Http404(_("This change has not been replayed."))
        return Response(ChangeReplayOutputSerializer(run).data)

    @extend_schema(
        operation_id="changes_replay_create",
        tags=["changes"],
        summary=_("Replay a draft or proposed rule change against the rules in force"),
        description=_(
            "Replays the last 30 whole days of recorded jobs twice, under the rules in force "
            "and with the change, as a background task. The same inputs (rules revision, "
            "edits, window) reuse their run."
        ),
        request=InputSerializer,
        examples=[
            OpenApiExample("Replay", request_only=True, value={}),
            OpenApiExample(
                "Queued",
                response_only=True,
                status_codes=["202"],
                value={**REPLAY_EXAMPLE, "status": "queued", "progress": 0, "started_at": None},
            ),
        ],
        responses={
            202: ChangeReplayOutputSerializer,
            400: BAD_INPUT,
            403: FORBIDDEN,
            404: NOT_FOUND,
        },
    )
    def post(self, request: Request, pk: int) -> Response:
        change = rule_change_get(user=request.user, pk=pk)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run, _queued = services.change_replay_start(change=change, user=signed_in_user(request))
        return Response(ChangeReplayOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)
