"""Quotas: what each project may use of one flavor in one pool."""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import GpuFlavor, Pool, PreemptionClass, Project, Quota
from governance.selectors import QUOTA_SORTS, quota_get, quota_list
from governance.toolkit.api import (
    BAD_FILTER,
    NOT_FOUND,
    ETagMixin,
    captured_example,
    get_paginated_response,
    parse_filters,
    slug_filter,
    sort_filter,
)
from governance.toolkit.counting import HistoryCountedPagination

from .proposals import propose_create, propose_delete, propose_edit


class QuotaListApi(ETagMixin, APIView):
    post = propose_create(Quota, tag="quotas")
    # Counted once while the quotas are unchanged: the count of every quota grows with them.
    pagination_class = HistoryCountedPagination

    class FilterSerializer(serializers.Serializer):
        project = slug_filter(Project.objects.all(), _("Quotas of this project."))
        pool = slug_filter(Pool.objects.all(), _("Quotas in this pool."))
        flavor = slug_filter(GpuFlavor.objects.all(), _("Quotas of this GPU flavor."))
        preemption_class = slug_filter(
            PreemptionClass.objects.all(), _("Quotas in this preemption class.")
        )
        sort = sort_filter(QUOTA_SORTS)

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        project = serializers.SlugField(source="project.slug")
        pool = serializers.SlugField(source="pool.slug")
        flavor = serializers.SlugField(source="flavor.slug")
        guarantee = serializers.IntegerField(help_text=_("GPUs always given back on demand."))
        borrow_limit = serializers.IntegerField(
            allow_null=True, help_text=_("GPUs above the guarantee; null: no limit in the pool.")
        )
        lending_limit = serializers.IntegerField(
            allow_null=True, help_text=_("Idle guarantee others may borrow; null: all of it.")
        )
        maximum = serializers.IntegerField(
            allow_null=True, help_text=_("Guarantee plus borrow limit; null: bounded by the pool.")
        )
        fair_share_weight = serializers.IntegerField()
        reclaim_grace_minutes = serializers.IntegerField()
        preemption_class = serializers.SlugField(source="preemption_class.slug")

        class Meta:
            ref_name = "Quota"

    @extend_schema(
        operation_id="quotas_list",
        examples=[captured_example("quotas_list")],
        tags=["quotas"],
        summary=_("List quotas"),
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_FILTER},
    )
    def get(self, request: Request) -> Response:
        quotas = quota_list(**parse_filters(self.FilterSerializer, request))
        return get_paginated_response(
            serializer_class=self.OutputSerializer, queryset=quotas, request=request, view=self
        )


class QuotaDetailApi(ETagMixin, APIView):
    patch = propose_edit(Quota, quota_get, tag="quotas", key="pk")
    delete = propose_delete(Quota, quota_get, tag="quotas", key="pk")

    OutputSerializer = QuotaListApi.OutputSerializer

    @extend_schema(
        operation_id="quotas_retrieve",
        examples=[captured_example("quotas_retrieve")],
        tags=["quotas"],
        summary=_("Show a quota"),
        responses={200: OutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, pk: int) -> Response:
        quota = quota_get(user=request.user, pk=pk)
        return Response(self.OutputSerializer(quota).data)
