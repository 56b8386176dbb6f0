"""GPU flavors: the kinds of GPU, and how many of each every pool holds."""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import GpuFlavor
from governance.selectors import FLAVOR_SORTS, flavor_get, flavor_list, pool_usage
from governance.toolkit.api import (
    BAD_FILTER,
    NOT_FOUND,
    ETagMixin,
    LimitOffsetPagination,
    captured_example,
    get_paginated_response,
    parse_filters,
    pool_use_serializer,
    search_param,
    sort_filter,
)

from .proposals import propose_create, propose_delete, propose_edit


class FlavorListApi(ETagMixin, APIView):
    post = propose_create(GpuFlavor, tag="flavors")
    pagination_class = LimitOffsetPagination

    class FilterSerializer(serializers.Serializer):
        q = search_param(_("Text in the slug, name, GPU model or Slurm GRES type."))
        sort = sort_filter(FLAVOR_SORTS)

    class OutputSerializer(serializers.Serializer):
        slug = serializers.SlugField()
        name = serializers.CharField()
        gpu_model = serializers.CharField()
        memory_gb = serializers.IntegerField()
        gres_type = serializers.CharField()
        node_labels = serializers.DictField(child=serializers.CharField())
        node_taints = serializers.ListField(child=serializers.DictField())
        total_gpus = serializers.IntegerField(help_text=_("GPUs of this flavor in all pools."))

        class Meta:
            ref_name = "FlavorListItem"

    @extend_schema(
        operation_id="flavors_list",
        examples=[captured_example("flavors_list")],
        tags=["flavors"],
        summary=_("List GPU flavors"),
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_FILTER},
    )
    def get(self, request: Request) -> Response:
        flavors = flavor_list(**parse_filters(self.FilterSerializer, request))
        return get_paginated_response(
            serializer_class=self.OutputSerializer, queryset=flavors, request=request, view=self
        )


class FlavorDetailApi(ETagMixin, APIView):
    patch = propose_edit(GpuFlavor, flavor_get, tag="flavors", key="slug")
    delete = propose_delete(GpuFlavor, flavor_get, tag="flavors", key="slug")

    class OutputSerializer(serializers.Serializer):
        slug = serializers.SlugField(source="flavor.slug")
        name = serializers.CharField(source="flavor.name")
        gpu_model = serializers.CharField(source="flavor.gpu_model")
        memory_gb = serializers.IntegerField(source="flavor.memory_gb")
        gres_type = serializers.CharField(source="flavor.gres_type")
        node_labels = serializers.DictField(
            source="flavor.node_labels", child=serializers.CharField()
        )
        node_taints = serializers.ListField(
            source="flavor.node_taints", child=serializers.DictField()
        )
        pools = pool_use_serializer(name="FlavorPoolUse", key="pool")

        class Meta:
            ref_name = "FlavorDetail"

    @extend_schema(
        operation_id="flavors_retrieve",
        examples=[captured_example("flavors_retrieve")],
        tags=["flavors"],
        summary=_("Show a GPU flavor with its capacity in each pool"),
        responses={200: OutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        flavor = flavor_get(user=request.user, slug=slug)
        pools = pool_usage(flavor=flavor)
        return Response(self.OutputSerializer({"flavor": flavor, "pools": pools}).data)
