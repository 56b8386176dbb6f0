"""Pools: GPUs shared by projects, per flavor, with their guarantees."""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import Pool
from governance.selectors import POOL_SORTS, pool_get, pool_list, pool_usage
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
    slug_filter,
    sort_filter,
)

from .proposals import propose_create, propose_delete, propose_edit


class PoolListApi(ETagMixin, APIView):
    post = propose_create(Pool, tag="pools")
    pagination_class = LimitOffsetPagination

    class FilterSerializer(serializers.Serializer):
        # A field named "parent" (DRF's own attribute of a bound field): typed apart.
        parent = slug_filter(Pool.objects.all(), _("Pools directly inside this pool."))  # type: ignore[assignment]
        q = search_param(_("Text in the slug, name or description."))
        sort = sort_filter(POOL_SORTS)

    class OutputSerializer(serializers.Serializer):
        slug = serializers.SlugField()
        name = serializers.CharField()
        description = serializers.CharField()
        parent = serializers.SlugField(source="parent.slug", allow_null=True)  # type: ignore[assignment]
        capacities = inline_serializer(
            name="PoolCapacity",
            many=True,
            help_text=_("GPUs of each flavor in the pool."),
            fields={
                "flavor": serializers.SlugField(source="flavor.slug"),
                "gpus": serializers.IntegerField(),
            },
        )
        project_count = serializers.IntegerField(help_text=_("Projects with a quota in the pool."))

        class Meta:
            ref_name = "PoolListItem"

    @extend_schema(
        operation_id="pools_list",
        examples=[captured_example("pools_list")],
        tags=["pools"],
        summary=_("List pools"),
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_FILTER},
    )
    def get(self, request: Request) -> Response:
        pools = pool_list(**parse_filters(self.FilterSerializer, request))
        return get_paginated_response(
            serializer_class=self.OutputSerializer, queryset=pools, request=request, view=self
        )


class PoolDetailApi(ETagMixin, APIView):
    patch = propose_edit(Pool, pool_get, tag="pools", key="slug")
    delete = propose_delete(Pool, pool_get, tag="pools", key="slug")

    class OutputSerializer(serializers.Serializer):
        slug = serializers.SlugField(source="pool.slug")
        name = serializers.CharField(source="pool.name")
        description = serializers.CharField(source="pool.description")
        parent = serializers.SlugField(  # type: ignore[assignment]
            source="pool.parent.slug", allow_null=True
        )
        capacities = pool_use_serializer(name="PoolFlavorUse", key="flavor")

        class Meta:
            ref_name = "PoolDetail"

    @extend_schema(
        operation_id="pools_retrieve",
        examples=[captured_example("pools_retrieve")],
        tags=["pools"],
        summary=_("Show a pool with its capacity and guarantees per flavor"),
        responses={200: OutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        pool = pool_get(user=request.user, slug=slug)
        capacities = pool_usage(pool=pool)
        return Response(self.OutputSerializer({"pool": pool, "capacities": capacities}).data)
