"""Projects: who works on what, at which tier, with which quotas."""

from django.shortcuts import get_object_or_404
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import PriorityTier, Project, ProjectRole, User
from governance.selectors import (
    PROJECT_SORTS,
    project_get,
    project_list,
    project_memberships,
    quotas_for_projects,
    split_names,
)
from governance.toolkit.api import (
    BAD_FILTER,
    NOT_FOUND,
    ETagMixin,
    LimitOffsetPagination,
    captured_example,
    change_example,
    get_paginated_response,
    parse_filters,
    search_param,
    slug_filter,
    sort_filter,
)

from .proposals import (
    PROPOSAL_RESPONSES,
    MembershipOutputSerializer,
    MembershipRemoveInputSerializer,
    MembershipSetInputSerializer,
    membership_edit,
    propose_create,
    propose_delete,
    propose_edit,
)

NULL_TIER_HELP = _("The project's tier by slug; null means the default tier.")


class ProjectListApi(ETagMixin, APIView):
    post = propose_create(Project, tag="projects")
    pagination_class = LimitOffsetPagination

    class FilterSerializer(serializers.Serializer):
        tier = slug_filter(
            PriorityTier.objects.all(),
            _("Projects whose tier is this one (projects on the default tier have none)."),
        )
        member = serializers.SlugRelatedField(
            slug_field="username",
            queryset=User.objects.all(),
            required=False,
            help_text=_("Projects this user (a username) is a lead or member of."),
        )
        q = search_param(_("Text in the slug, name or description."))
        sort = sort_filter(PROJECT_SORTS)

    class OutputSerializer(serializers.Serializer):
        slug = serializers.SlugField()
        name = serializers.CharField()
        description = serializers.CharField()
        tier = serializers.SlugField(source="tier_slug", allow_null=True, help_text=NULL_TIER_HELP)
        leads = serializers.SerializerMethodField(help_text=_("The leads' usernames."))
        member_count = serializers.IntegerField()
        guaranteed_gpus = serializers.IntegerField(
            help_text=_("The sum of the guarantees of the project's quotas.")
        )

        class Meta:
            ref_name = "ProjectListItem"

        def get_leads(self, project: Project) -> list[str]:
            return split_names(project.lead_usernames)  # type: ignore[attr-defined]  # project_list()

    @extend_schema(
        operation_id="projects_list",
        examples=[captured_example("projects_list")],
        tags=["projects"],
        summary=_("List projects"),
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_FILTER},
    )
    def get(self, request: Request) -> Response:
        projects = project_list(**parse_filters(self.FilterSerializer, request))
        return get_paginated_response(
            serializer_class=self.OutputSerializer, queryset=projects, request=request, view=self
        )


class ProjectDetailApi(ETagMixin, APIView):
    patch = propose_edit(Project, project_get, tag="projects", key="slug")
    delete = propose_delete(Project, project_get, tag="projects", key="slug")

    class OutputSerializer(serializers.Serializer):
        slug = serializers.SlugField(source="project.slug")
        name = serializers.CharField(source="project.name")
        description = serializers.CharField(source="project.description")
        tier = serializers.SlugField(
            source="project.tier.slug", allow_null=True, help_text=NULL_TIER_HELP
        )
        members = inline_serializer(
            name="ProjectMember",
            many=True,
            help_text=_("Leads first, then members."),
            fields={
                "username": serializers.CharField(source="user.username"),
                "name": serializers.CharField(source="user.get_full_name"),
                "role": serializers.ChoiceField(choices=ProjectRole.choices),
            },
        )
        quotas = inline_serializer(
            name="ProjectQuota",
            many=True,
            fields={
                "id": serializers.IntegerField(),
                "pool": serializers.SlugField(source="pool.slug"),
                "flavor": serializers.SlugField(source="flavor.slug"),
                "guarantee": serializers.IntegerField(),
                "borrow_limit": serializers.IntegerField(allow_null=True),
                "lending_limit": serializers.IntegerField(allow_null=True),
                "maximum": serializers.IntegerField(allow_null=True),
                "fair_share_weight": serializers.IntegerField(),
                "reclaim_grace_minutes": serializers.IntegerField(),
                "preemption_class": serializers.SlugField(source="preemption_class.slug"),
            },
        )

        class Meta:
            ref_name = "ProjectDetail"

    @extend_schema(
        operation_id="projects_retrieve",
        examples=[captured_example("projects_retrieve")],
        tags=["projects"],
        summary=_("Show a project with its members and quotas"),
        responses={200: OutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        project = project_get(user=request.user, slug=slug)
        detail = {
            "project": project,
            "members": project_memberships(project=project),
            "quotas": quotas_for_projects(project_ids=[project.pk]),
        }
        return Response(self.OutputSerializer(detail).data)


class ProjectMemberListApi(ETagMixin, APIView):
    pagination_class = LimitOffsetPagination

    @extend_schema(
        operation_id="projects_members_list",
        examples=[captured_example("projects_members_list")],
        tags=["projects"],
        summary=_("List a project's members, leads first"),
        responses={200: MembershipOutputSerializer(many=True), 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        project = project_get(user=request.user, slug=slug)
        return get_paginated_response(
            serializer_class=MembershipOutputSerializer,
            queryset=project_memberships(project=project),
            request=request,
            view=self,
        )

    @extend_schema(
        operation_id="projects_members_create",
        tags=["projects"],
        summary=_("Propose adding a member or changing their role (a rule change)"),
        request=MembershipSetInputSerializer,
        responses=PROPOSAL_RESPONSES,
        examples=[
            OpenApiExample(
                "Add a lead",
                request_only=True,
                value={
                    "reason": "Takes over the project (OPS-77).",
                    "username": "lead",
                    "role": "lead",
                },
            ),
            change_example(),
        ],
    )
    def post(self, request: Request, slug: str) -> Response:
        project = project_get(user=request.user, slug=slug, for_edit=True)
        serializer = MembershipSetInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        member, role = data.pop("username"), data.pop("role")
        return membership_edit(request, project=project, member=member, role=role, meta=data)


class ProjectMemberDetailApi(APIView):
    @extend_schema(
        operation_id="projects_members_destroy",
        tags=["projects"],
        summary=_("Propose removing a member (a rule change)"),
        request=MembershipRemoveInputSerializer,
        responses=PROPOSAL_RESPONSES,
        examples=[
            OpenApiExample(
                "Remove",
                request_only=True,
                value={"reason": "Left the team."},
            ),
            change_example("The proposed removal"),
        ],
    )
    def delete(self, request: Request, slug: str, username: str) -> Response:
        project = project_get(user=request.user, slug=slug, for_edit=True)
        membership = get_object_or_404(
            project_memberships(project=project), user__username=username
        )
        serializer = MembershipRemoveInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return membership_edit(
            request,
            project=project,
            member=membership.user,
            role=None,
            meta=dict(serializer.validated_data),
        )
