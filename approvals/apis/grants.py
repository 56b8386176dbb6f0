"""The grant reads: grants, a grant, a project's grants."""

from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals import selectors
from approvals.models import grant_summary
from governance.models import Grant, GrantKind, GrantState, Project
from governance.selectors import project_get
from governance.toolkit.api import (
    BAD_FILTER,
    NOT_FOUND,
    ETagMixin,
    LimitOffsetPagination,
    captured_example,
    parse_filters,
    slug_filter,
    sort_filter,
)

from .requests import _TermsOutputSerializer


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
