"""The request reads: a request's serializers, the list, a request, the inbox, the notification
counts."""

from typing import Any

from django.contrib.auth import get_user_model
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals import selectors
from approvals.models import RequestKind, RequestState, UpgradeRequest
from governance.models import Project
from governance.toolkit.api import (
    BAD_FILTER,
    NOT_FOUND,
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
