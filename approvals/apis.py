"""The requests API, under ``/api/v1/``: one ``APIView`` per operation.

Reads: ``requests/`` (filters), ``requests/<id>/``, ``inbox/`` and ``notifications/counts/``.
Writes: ``requests/create/`` and ``requests/<id>/{submit,withdraw,approve,reject,revoke}/``.
A write parses its body with a nested ``InputSerializer`` (400 with the field's message),
calls the service (a ``ValidationError`` is a 400 naming the field, a ``PermissionDenied``
a 403, e.g. for approving one's own request) and answers with the request as
``RequestDetailApi`` shows it.
"""

import json
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals import selectors, services
from approvals.models import RequestKind, RequestState, UpgradeRequest, grant_summary
from governance.models import TERM_FIELDS, Grant, GrantKind, GrantState, Project, Terms
from governance.selectors import project_get, signed_in_user
from governance.services import REASON_MAX_LENGTH, TEXT_MAX_LENGTH
from governance.toolkit.api import (
    BAD_FILTER,
    BAD_INPUT,
    CONFLICT,
    NOT_FOUND,
    Conflict,
    ETagMixin,
    LimitOffsetPagination,
    captured_example,
    error_response,
    get_paginated_response,
    parse_filters,
    slug_filter,
    sort_filter,
)

FORBIDDEN = error_response(
    _("Not allowed: e.g. approving one's own request, or not an approver of it."),
    example={
        "error": "permission_denied",
        "detail": "You may not approve your own request.",
        "fields": {},
    },
)


# --- output ---------------------------------------------------------------------------------


class _ExtendableField(serializers.PrimaryKeyRelatedField):
    """A request to extend, among those the caller may read: a missing request and another
    project's get the same answer, so the field tells no one which ids exist."""

    default_error_messages = {
        "does_not_exist": _("No request #{pk_value} that you may extend."),
        "incorrect_type": _("Give the number of the request to extend."),
    }

    def get_queryset(self) -> Any:
        return selectors.request_list_for(user=self.context["request"].user)


class _NamedSerializer(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()

    class Meta:
        ref_name = "RequestProject"


class _ApprovalSerializer(serializers.Serializer):
    approver = serializers.CharField(source="approver.username")
    decision = serializers.CharField()
    comment = serializers.CharField()
    at = serializers.DateTimeField()

    class Meta:
        ref_name = "RequestApproval"


class _EventSerializer(serializers.Serializer):
    action = serializers.CharField()
    actor = serializers.CharField(source="actor.username")
    comment = serializers.CharField(source="display_comment")
    at = serializers.DateTimeField()

    class Meta:
        ref_name = "RequestEvent"


class _GrantSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    state = serializers.CharField()
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField()

    class Meta:
        ref_name = "RequestGrant"


class _TermsOutputSerializer(serializers.Serializer):
    """The terms a request asks for and its grant carries (``governance.GrantTerms``)."""

    tier = serializers.SlugField(source="tier.slug", allow_null=True, default=None)
    pool = serializers.SlugField(source="pool.slug", allow_null=True, default=None)
    flavor = serializers.SlugField(source="flavor.slug", allow_null=True, default=None)
    extra_gpus = serializers.IntegerField(allow_null=True)
    lift_borrow_limit = serializers.BooleanField()
    preemption_class = serializers.SlugField(
        source="preemption_class.slug", allow_null=True, default=None
    )
    job_ids = serializers.ListField(child=serializers.CharField())
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField()


class RequestOutputSerializer(_TermsOutputSerializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=RequestKind.choices)
    state = serializers.ChoiceField(choices=RequestState.choices)
    project = _NamedSerializer()
    requester = serializers.CharField(source="requester.username")
    summary = serializers.SerializerMethodField(help_text=_("What the request asks for."))
    justification = serializers.CharField()
    business_impact = serializers.CharField()
    deadline = serializers.DateTimeField(allow_null=True)
    extends = serializers.IntegerField(source="extends_id", allow_null=True)
    approvers = serializers.SerializerMethodField(help_text=_("Who decides the request."))
    approvals_required = serializers.IntegerField()
    approvals_given = serializers.IntegerField()
    approvals = _ApprovalSerializer(many=True)
    flagged = serializers.BooleanField()
    flag_reason = serializers.CharField(source="display_flag_reason")
    grant = _GrantSerializer(allow_null=True)
    created_at = serializers.DateTimeField()
    submitted_at = serializers.DateTimeField(allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)

    class Meta:
        ref_name = "Request"

    def get_summary(self, obj: UpgradeRequest) -> str:
        return obj.summary

    def get_approvers(self, obj: UpgradeRequest) -> str:
        return selectors.approvers_label(obj) if obj.submitted_at else ""


class RequestDetailOutputSerializer(RequestOutputSerializer):
    evidence = serializers.JSONField(
        help_text=_(
            "Captured at submission: effective tier and quotas, pool commitment, approved "
            "exceptions of the last 90 days. usage and recent_waits are null until workload "
            "evidence exists."
        )
    )
    events = _EventSerializer(many=True)

    class Meta:
        ref_name = "RequestDetail"


class InboxOutputSerializer(RequestOutputSerializer):
    evidence = serializers.JSONField()

    class Meta:
        ref_name = "InboxRequest"


def _detail(upgrade: UpgradeRequest, request: Request) -> Response:
    fresh = selectors.request_get(user=request.user, pk=upgrade.pk)
    return Response(RequestDetailOutputSerializer(fresh).data)


# --- reads ----------------------------------------------------------------------------------


class RequestListApi(APIView):
    pagination_class = LimitOffsetPagination

    class FilterSerializer(serializers.Serializer):
        state = serializers.ChoiceField(choices=RequestState.choices, required=False)
        kind = serializers.ChoiceField(choices=RequestKind.choices, required=False)
        project = slug_filter(Project.objects.all(), _("Requests for this project."))
        requester = serializers.SlugRelatedField(
            slug_field="username",
            queryset=get_user_model().objects.all(),
            required=False,
            help_text=_("Requests filed by this user name."),
        )
        sort = sort_filter(selectors.REQUEST_SORTS)

    @extend_schema(
        operation_id="requests_list",
        examples=[captured_example("requests_list")],
        tags=["requests"],
        summary=_("List requests"),
        parameters=[FilterSerializer],
        responses={200: RequestOutputSerializer(many=True), 400: BAD_FILTER},
    )
    def get(self, request: Request) -> Response:
        filters = parse_filters(self.FilterSerializer, request)
        requests = selectors.request_list_for(user=request.user, **filters)
        return get_paginated_response(
            serializer_class=RequestOutputSerializer,
            queryset=requests,
            request=request,
            view=self,
        )


class RequestDetailApi(APIView):
    @extend_schema(
        operation_id="requests_retrieve",
        examples=[captured_example("requests_retrieve")],
        tags=["requests"],
        summary=_("Show a request with its evidence and timeline"),
        responses={200: RequestDetailOutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, pk: int) -> Response:
        upgrade = selectors.request_get(user=request.user, pk=pk)
        return Response(RequestDetailOutputSerializer(upgrade).data)


class InboxApi(APIView):
    pagination_class = LimitOffsetPagination

    @extend_schema(
        operation_id="inbox_list",
        examples=[captured_example("inbox_list")],
        tags=["requests"],
        summary=_("Requests waiting for my decision, the oldest first"),
        responses={200: InboxOutputSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        return get_paginated_response(
            serializer_class=InboxOutputSerializer,
            queryset=selectors.inbox(user=request.user),
            request=request,
            view=self,
        )


class NotificationCountsApi(APIView):
    class OutputSerializer(serializers.Serializer):
        unread = serializers.IntegerField(help_text=_("Unread notifications."))
        inbox = serializers.IntegerField(help_text=_("Requests waiting for my decision."))

        class Meta:
            ref_name = "NotificationCounts"

    @extend_schema(
        operation_id="notification_counts",
        examples=[captured_example("notification_counts")],
        tags=["requests"],
        summary=_("My unread notifications and pending decisions"),
        responses={200: OutputSerializer},
    )
    def get(self, request: Request) -> Response:
        counts = {
            "unread": selectors.unread_count(user=request.user),
            "inbox": selectors.inbox_count(user=request.user),
        }
        return Response(self.OutputSerializer(counts).data)


# --- grants ---------------------------------------------------------------------------------


class GrantOutputSerializer(_TermsOutputSerializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=GrantKind.choices)
    state = serializers.ChoiceField(
        choices=GrantState.choices, help_text=_("The last transition the beat task carried out.")
    )
    project = serializers.SlugField(source="project.slug")
    summary = serializers.SerializerMethodField(help_text=_("What the grant changes."))
    revoked_at = serializers.DateTimeField(allow_null=True)
    request = serializers.IntegerField(
        source="request_id", allow_null=True, help_text=_("The request it came from, if any.")
    )
    in_force = serializers.SerializerMethodField(
        help_text=_("Whether it applies at the instant asked for (now by default).")
    )

    class Meta:
        ref_name = "Grant"

    def get_summary(self, grant: Grant) -> str:
        return grant_summary(grant)

    def get_in_force(self, grant: Grant) -> bool:
        return grant.is_active_at(self.context.get("at") or timezone.now())


GRANT_EXAMPLE = OpenApiExample(
    "A queue jump in force",
    response_only=True,
    value={
        "id": 12,
        "kind": "queue_jump",
        "state": "active",
        "project": "vision",
        "summary": "jobs 4242 at Production service",
        "tier": "production",
        "pool": None,
        "flavor": None,
        "extra_gpus": None,
        "lift_borrow_limit": False,
        "preemption_class": None,
        "job_ids": ["4242"],
        "starts_at": "2026-12-01T08:00:00Z",
        "ends_at": "2026-12-02T08:00:00Z",
        "revoked_at": None,
        "request": 31,
        "in_force": True,
    },
)


class GrantListApi(ETagMixin, APIView):
    pagination_class = LimitOffsetPagination

    class FilterSerializer(serializers.Serializer):
        project = slug_filter(Project.objects.all(), _("Grants of this project."))
        at = serializers.DateTimeField(
            required=False, help_text=_("Only grants in force at this instant (ISO 8601).")
        )
        kind = serializers.ChoiceField(choices=GrantKind.choices, required=False)
        state = serializers.ChoiceField(choices=GrantState.choices, required=False)
        sort = sort_filter(selectors.GRANT_SORTS)

    @extend_schema(
        operation_id="grants_list",
        examples=[captured_example("grants_list"), GRANT_EXAMPLE],
        tags=["grants"],
        summary=_("List grants; with at, those in force at that instant"),
        parameters=[FilterSerializer],
        responses={200: GrantOutputSerializer(many=True), 400: BAD_FILTER},
    )
    def get(self, request: Request) -> Response:
        filters = parse_filters(self.FilterSerializer, request)
        grants = selectors.grant_list(user=request.user, **filters)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(grants, request, view=self)
        assert page is not None
        context = {"at": filters.get("at")}
        data = GrantOutputSerializer(page, many=True, context=context).data
        return paginator.get_paginated_response(data)


class GrantDetailApi(ETagMixin, APIView):
    @extend_schema(
        operation_id="grants_retrieve",
        examples=[captured_example("grants_retrieve"), GRANT_EXAMPLE],
        tags=["grants"],
        summary=_("Show a grant"),
        responses={200: GrantOutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, pk: int) -> Response:
        return Response(GrantOutputSerializer(selectors.grant_get(user=request.user, pk=pk)).data)


class ProjectGrantListApi(ETagMixin, APIView):
    """The project's grants page as data: in force at ``at`` (default now) or still to start."""

    pagination_class = LimitOffsetPagination

    class FilterSerializer(serializers.Serializer):
        at = serializers.DateTimeField(
            required=False, help_text=_("The instant (ISO 8601); now when absent.")
        )

    @extend_schema(
        operation_id="projects_grants_list",
        examples=[captured_example("projects_grants_list"), GRANT_EXAMPLE],
        tags=["grants"],
        summary=_("A project's grants in force at an instant or still to start, by end"),
        parameters=[FilterSerializer],
        responses={200: GrantOutputSerializer(many=True), 400: BAD_FILTER, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        project = project_get(user=request.user, slug=slug)
        at = parse_filters(self.FilterSerializer, request).get("at") or timezone.now()
        rows = selectors.project_grants(project=project, at=at)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)  # type: ignore[arg-type]
        assert page is not None
        grants = [row.grant for row in page]
        for row in page:
            row.grant.request_id = row.request.pk if row.request else None  # type: ignore[attr-defined]
        data = GrantOutputSerializer(grants, many=True, context={"at": at}).data
        return paginator.get_paginated_response(data)


# --- writes ---------------------------------------------------------------------------------

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
