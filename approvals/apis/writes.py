"""The request writes: create (idempotent by key), and submit, withdraw, approve, reject, revoke."""

import json
from collections.abc import Callable
from typing import Any

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals import selectors, services
from approvals.models import UpgradeRequest
from governance.models import TERM_FIELDS, Project, Terms
from governance.selectors import signed_in_user
from governance.services import REASON_MAX_LENGTH, TEXT_MAX_LENGTH
from governance.toolkit.api import (
    BAD_INPUT,
    CONFLICT,
    NOT_FOUND,
    Conflict,
    captured_example,
)

from .requests import FORBIDDEN, RequestDetailOutputSerializer, _detail, _ExtendableField

IDEMPOTENCY_KEY = OpenApiParameter(
    name="Idempotency-Key",
    location=OpenApiParameter.HEADER,
    required=False,
    type=str,
    description=_(
        "Any unique string (a UUID, or the pipeline's run id and step): a retry with the "
        "same key and body gets the first answer and files nothing new."
    ),
)


def _payload(request: Request) -> Any:
    data = request.data
    if hasattr(data, "lists"):
        return {key: values for key, values in data.lists()}
    return data


def idempotent(
    request: Request, *, operation: str, perform: Callable[[Request], Response]
) -> Response:
    """``perform(request)``, once per ``Idempotency-Key`` when the header is given.

    A replay answers with the stored status and body and the header
    ``Idempotent-Replayed: true``; a reused key with another body is a 409.
    """
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return perform(request)

    def run() -> tuple[int, Any]:
        response = perform(request)
        return response.status_code, json.loads(JSONRenderer().render(response.data))

    try:
        answer = services.idempotent_call(
            user=signed_in_user(request),
            key=key,
            operation=operation,
            payload=_payload(request),
            perform=run,
        )
    except services.IdempotencyKeyReused:
        raise Conflict(_("This Idempotency-Key was used with a different request body.")) from None
    response = Response(answer.body, status=answer.status)
    if answer.replayed:
        response["Idempotent-Replayed"] = "true"
    return response


class _TermsInputSerializer(serializers.ModelSerializer):
    """A request's terms as the model (``GrantTerms``) defines them; related rows by slug."""

    serializer_related_field = serializers.SlugRelatedField
    job_ids = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, max_length=100
    )

    class Meta:
        model = UpgradeRequest
        fields: tuple[str, ...] = TERM_FIELDS
        extra_kwargs = {
            **{name: {"slug_field": "slug"} for name in ("tier", "pool", "flavor")},
            "preemption_class": {"slug_field": "slug"},
            "extra_gpus": {"min_value": 1, "max_value": 10000},
        }


class RequestCreateApi(APIView):
    class InputSerializer(_TermsInputSerializer):
        project = serializers.SlugRelatedField(slug_field="slug", queryset=Project.objects.all())
        justification = serializers.CharField(max_length=TEXT_MAX_LENGTH)
        business_impact = serializers.CharField(max_length=TEXT_MAX_LENGTH)
        deadline = serializers.DateTimeField(required=False, allow_null=True)
        extends = _ExtendableField(required=False, allow_null=True)
        submit = serializers.BooleanField(
            required=False,
            default=True,
            help_text=_("Send to the approvers at once (default), or keep as a draft."),
        )

        class Meta(_TermsInputSerializer.Meta):
            ref_name = "RequestCreateInput"
            fields = (
                "project",
                *TERM_FIELDS,
                "justification",
                "business_impact",
                "deadline",
                "extends",
                "submit",
            )

    @extend_schema(
        operation_id="requests_create",
        tags=["requests"],
        summary=_("File a request (submitted at once unless submit is false)"),
        description=_(
            "With an Idempotency-Key header, a retried call (same key, same body) answers "
            "as the first one did and files nothing new; the same key with another body is "
            "a 409. Keys belong to the caller and are remembered for "
            "ARBITER_IDEMPOTENCY_KEY_HOURS (24 by default)."
        ),
        parameters=[IDEMPOTENCY_KEY],
        request=InputSerializer,
        responses={
            201: RequestDetailOutputSerializer,
            400: BAD_INPUT,
            403: FORBIDDEN,
            409: CONFLICT,
        },
        examples=[
            OpenApiExample(
                "Queue jump for two jobs",
                request_only=True,
                value={
                    "project": "vision",
                    "kind": "queue_jump",
                    "tier": "production",
                    "job_ids": ["4242", "4243"],
                    "starts_at": "2026-12-01T08:00:00Z",
                    "ends_at": "2026-12-02T08:00:00Z",
                    "justification": "Release candidate evaluation blocks the launch.",
                    "business_impact": "The launch slips a day without it.",
                },
            ),
            OpenApiExample(
                "Quota exception",
                request_only=True,
                value={
                    "project": "vision",
                    "kind": "quota_exception",
                    "pool": "training",
                    "flavor": "a100-80g",
                    "extra_gpus": 8,
                    "starts_at": "2026-12-01T08:00:00Z",
                    "ends_at": "2026-12-08T08:00:00Z",
                    "justification": "Model v3 ablations.",
                    "business_impact": "The paper deadline.",
                },
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        return idempotent(request, operation="requests_create", perform=self._create)

    def _create(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        upgrade = services.request_create(
            user=signed_in_user(request),
            project=data["project"],
            terms=Terms.from_data(data),
            justification=data["justification"],
            business_impact=data["business_impact"],
            deadline=data.get("deadline"),
            extends=data.get("extends"),
            submit=data["submit"],
        )
        response = _detail(upgrade, request)
        response.status_code = status.HTTP_201_CREATED
        return response


class _CommentInput(serializers.Serializer):
    comment = serializers.CharField(
        max_length=TEXT_MAX_LENGTH, required=False, allow_blank=True, default=""
    )

    class Meta:
        ref_name = "RequestCommentInput"


class _ReasonInput(serializers.Serializer):
    reason = serializers.CharField(max_length=REASON_MAX_LENGTH)

    class Meta:
        ref_name = "RequestReasonInput"


def _action_schema(operation_id: str, summary: Any, body: Any) -> Any:
    return extend_schema(
        operation_id=operation_id,
        tags=["requests"],
        summary=summary,
        request=body,
        responses={
            200: RequestDetailOutputSerializer,
            400: BAD_INPUT,
            403: FORBIDDEN,
            404: NOT_FOUND,
        },
        examples=[captured_example("requests_retrieve", "The request")],
    )


def _act(request: Request, pk: int, input_serializer: Any, service: Any) -> Response:
    """Validate the input of an action on a request, call its service, answer the request."""
    upgrade = selectors.request_get(user=request.user, pk=pk)
    serializer = input_serializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    upgrade = service(request=upgrade, user=request.user, **serializer.validated_data)
    return _detail(upgrade, request)


class RequestSubmitApi(APIView):
    @_action_schema("requests_submit", _("Send a draft to its approvers"), None)
    def post(self, request: Request, pk: int) -> Response:
        upgrade = selectors.request_get(user=request.user, pk=pk)
        return _detail(
            services.request_submit(request=upgrade, user=signed_in_user(request)), request
        )


class RequestWithdrawApi(APIView):
    InputSerializer = _CommentInput

    @_action_schema("requests_withdraw", _("Withdraw a draft or pending request"), _CommentInput)
    def post(self, request: Request, pk: int) -> Response:
        return _act(request, pk, self.InputSerializer, services.request_withdraw)


class RequestApproveApi(APIView):
    InputSerializer = _CommentInput

    @_action_schema("requests_approve", _("Approve a request"), _CommentInput)
    def post(self, request: Request, pk: int) -> Response:
        return _act(request, pk, self.InputSerializer, services.request_approve)


class RequestRejectApi(APIView):
    InputSerializer = _ReasonInput

    @_action_schema("requests_reject", _("Reject a request, with a reason"), _ReasonInput)
    def post(self, request: Request, pk: int) -> Response:
        return _act(request, pk, self.InputSerializer, services.request_reject)


class RequestRevokeApi(APIView):
    InputSerializer = _ReasonInput

    @_action_schema("requests_revoke", _("Revoke an approved request's grant (ops)"), _ReasonInput)
    def post(self, request: Request, pk: int) -> Response:
        return _act(request, pk, self.InputSerializer, services.request_revoke)
