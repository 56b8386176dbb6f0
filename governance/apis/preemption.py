"""Preemption classes: which work may be preempted, and on what terms."""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import PreemptionClass, PreemptionKind
from governance.selectors import (
    PREEMPTION_CLASS_SORTS,
    preemption_class_get,
    preemption_class_list,
)
from governance.toolkit.api import (
    BAD_FILTER,
    NOT_FOUND,
    ETagMixin,
    LimitOffsetPagination,
    captured_example,
    get_paginated_response,
    parse_filters,
    search_param,
    sort_filter,
)

from .proposals import propose_create, propose_delete, propose_edit


class PreemptionClassListApi(ETagMixin, APIView):
    post = propose_create(PreemptionClass, tag="preemption-classes")
    pagination_class = LimitOffsetPagination

    class FilterSerializer(serializers.Serializer):
        kind = serializers.ChoiceField(
            choices=PreemptionKind.choices,
            required=False,
            help_text=_("Only classes of this kind."),
        )
        q = search_param(_("Text in the slug, name or business impact."))
        sort = sort_filter(PREEMPTION_CLASS_SORTS)

    class OutputSerializer(serializers.Serializer):
        slug = serializers.SlugField()
        name = serializers.CharField()
        kind = serializers.ChoiceField(choices=PreemptionKind.choices)
        requires_verified_checkpoint = serializers.BooleanField()
        max_checkpoint_interval_minutes = serializers.IntegerField(allow_null=True)
        min_runtime_minutes = serializers.IntegerField(allow_null=True)
        max_preemptions_per_day = serializers.IntegerField(allow_null=True)
        recovery_owner = serializers.CharField(
            source="recovery_owner.username", allow_null=True, help_text=_("A username.")
        )
        business_impact = serializers.CharField()
        quota_count = serializers.IntegerField(help_text=_("Quotas in this class."))

        class Meta:
            ref_name = "PreemptionClassListItem"

    @extend_schema(
        operation_id="preemption_classes_list",
        examples=[captured_example("preemption_classes_list")],
        tags=["preemption-classes"],
        summary=_("List preemption classes"),
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_FILTER},
    )
    def get(self, request: Request) -> Response:
        classes = preemption_class_list(**parse_filters(self.FilterSerializer, request))
        return get_paginated_response(
            serializer_class=self.OutputSerializer, queryset=classes, request=request, view=self
        )


class PreemptionClassDetailApi(ETagMixin, APIView):
    patch = propose_edit(
        PreemptionClass, preemption_class_get, tag="preemption-classes", key="slug"
    )
    delete = propose_delete(
        PreemptionClass, preemption_class_get, tag="preemption-classes", key="slug"
    )

    class OutputSerializer(serializers.Serializer):
        slug = serializers.SlugField()
        name = serializers.CharField()
        kind = serializers.ChoiceField(choices=PreemptionKind.choices)
        requires_verified_checkpoint = serializers.BooleanField()
        max_checkpoint_interval_minutes = serializers.IntegerField(allow_null=True)
        min_runtime_minutes = serializers.IntegerField(allow_null=True)
        max_preemptions_per_day = serializers.IntegerField(allow_null=True)
        recovery_owner = serializers.CharField(
            source="recovery_owner.username", allow_null=True, help_text=_("A username.")
        )
        business_impact = serializers.CharField()

        class Meta:
            ref_name = "PreemptionClassDetail"

    @extend_schema(
        operation_id="preemption_classes_retrieve",
        examples=[captured_example("preemption_classes_retrieve")],
        tags=["preemption-classes"],
        summary=_("Show a preemption class"),
        responses={200: OutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        preemption_class = preemption_class_get(user=request.user, slug=slug)
        return Response(self.OutputSerializer(preemption_class).data)
