"""The rules in force for one project: base rules plus the grants active at an instant."""

from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import GrantKind
from governance.selectors import effective_rules, project_get
from governance.toolkit.api import BAD_FILTER, NOT_FOUND, ETagMixin, captured_example, parse_filters


class ProjectEffectiveRulesApi(ETagMixin, APIView):
    """What a project (and a CI pipeline acting for it) may use now, grants included."""

    class FilterSerializer(serializers.Serializer):
        at = serializers.DateTimeField(
            required=False, help_text=_("The instant to evaluate (ISO 8601); default: now.")
        )

    class OutputSerializer(serializers.Serializer):
        project = serializers.SlugField(source="project.slug")
        at = serializers.DateTimeField()
        tier = serializers.SlugField(source="tier.slug", allow_null=True)
        allowed_tiers = serializers.ListField(child=serializers.SlugField())
        quotas = inline_serializer(
            name="EffectiveQuota",
            many=True,
            fields={
                "pool": serializers.SlugField(source="quota.pool.slug"),
                "flavor": serializers.SlugField(source="quota.flavor.slug"),
                "guarantee": serializers.IntegerField(),
                "borrow_limit": serializers.IntegerField(allow_null=True),
                "lending_limit": serializers.IntegerField(allow_null=True),
                "maximum": serializers.IntegerField(allow_null=True),
                "preemption_class": serializers.SlugField(source="preemption_class.slug"),
                "changed_by_grants": serializers.BooleanField(),
            },
        )
        job_tiers = serializers.DictField(child=serializers.SlugField())
        job_preemption_classes = serializers.DictField(child=serializers.SlugField())
        grants = inline_serializer(
            name="EffectiveGrant",
            many=True,
            fields={
                "id": serializers.IntegerField(),
                "kind": serializers.ChoiceField(choices=GrantKind.choices),
                "starts_at": serializers.DateTimeField(),
                "ends_at": serializers.DateTimeField(),
                "source": serializers.CharField(),
            },
        )

        class Meta:
            ref_name = "ProjectEffectiveRules"

    @extend_schema(
        operation_id="projects_effective_rules",
        examples=[captured_example("projects_effective_rules")],
        tags=["projects"],
        summary=_("The rules in force for a project, grants included"),
        parameters=[FilterSerializer],
        responses={200: OutputSerializer, 400: BAD_FILTER, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        project = project_get(user=request.user, slug=slug)
        at = parse_filters(self.FilterSerializer, request).get("at") or timezone.now()
        rules = effective_rules(at=at, project_slugs=[project.slug]).projects[project.slug]
        payload = {
            "project": rules.project,
            "at": at,
            "tier": rules.tier,
            "allowed_tiers": [tier.slug for tier in rules.allowed_tiers],
            "quotas": rules.quotas,
            "job_tiers": {job: tier.slug for job, tier in rules.job_tiers.items()},
            "job_preemption_classes": {
                job: cls.slug for job, cls in rules.job_preemption_classes.items()
            },
            "grants": rules.grants,
        }
        return Response(self.OutputSerializer(payload).data)
