"""Priority tiers: their order, owners, caps, aging and review dates."""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import GrantEnd, PriorityTier
from governance.selectors import TIER_SORTS, tier_get, tier_list
from governance.toolkit.api import (
    BAD_FILTER,
    NOT_FOUND,
    ETagMixin,
    LimitOffsetPagination,
    boolean_filter,
    captured_example,
    get_paginated_response,
    parse_filters,
    search_param,
    sort_filter,
)

from .proposals import propose_create, propose_delete, propose_edit


class TierListApi(ETagMixin, APIView):
    post = propose_create(PriorityTier, tag="tiers")
    pagination_class = LimitOffsetPagination

    class FilterSerializer(serializers.Serializer):
        may_preempt = boolean_filter(_("Only tiers that may (true) or may not (false) preempt."))
        is_default = boolean_filter(_("Only the default tier (true) or the others (false)."))
        due_before = serializers.DateField(
            required=False,
            help_text=_("Only tiers whose next review is due before this date (YYYY-MM-DD)."),
        )
        q = search_param(_("Text in the slug, name, description or eligibility."))
        sort = sort_filter(TIER_SORTS)

    class OutputSerializer(serializers.Serializer):
        slug = serializers.SlugField()
        name = serializers.CharField()
        score = serializers.IntegerField(help_text=_("From 1 to 100; higher runs first."))
        scheduler_value = serializers.IntegerField()
        description = serializers.CharField()
        owner = serializers.CharField(source="owner.username", help_text=_("A username."))
        eligibility = serializers.CharField()
        confirmed_by = serializers.CharField()
        max_gpus_per_job = serializers.IntegerField(allow_null=True)
        max_gpus_total = serializers.IntegerField(allow_null=True)
        may_preempt = serializers.BooleanField()
        preemptible_tiers = serializers.SerializerMethodField(
            help_text=_("Slugs of the tiers it may preempt.")
        )
        aging_after_minutes = serializers.IntegerField(allow_null=True)
        aging_step = serializers.IntegerField(allow_null=True)
        aging_cap = serializers.SlugField(source="aging_cap.slug", allow_null=True)
        after_grant = serializers.ChoiceField(
            choices=GrantEnd.choices,
            help_text=_("What happens to work admitted under a grant of it once the grant ends."),
        )
        review_cycle_days = serializers.IntegerField()
        wait_alert_minutes = serializers.IntegerField(allow_null=True)
        last_reviewed_on = serializers.DateField(allow_null=True)
        next_review_on = serializers.DateField(allow_null=True)
        is_default = serializers.BooleanField()

        class Meta:
            ref_name = "Tier"

        def get_preemptible_tiers(self, tier: PriorityTier) -> list[str]:
            return [victim.slug for victim in tier.preemptible_tiers.all()]

    @extend_schema(
        operation_id="tiers_list",
        examples=[captured_example("tiers_list")],
        tags=["tiers"],
        summary=_("List priority tiers, highest first"),
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_FILTER},
    )
    def get(self, request: Request) -> Response:
        tiers = tier_list(**parse_filters(self.FilterSerializer, request))
        return get_paginated_response(
            serializer_class=self.OutputSerializer, queryset=tiers, request=request, view=self
        )


class TierDetailApi(ETagMixin, APIView):
    patch = propose_edit(PriorityTier, tier_get, tag="tiers", key="slug")
    delete = propose_delete(PriorityTier, tier_get, tag="tiers", key="slug")

    OutputSerializer = TierListApi.OutputSerializer

    @extend_schema(
        operation_id="tiers_retrieve",
        examples=[captured_example("tiers_retrieve")],
        tags=["tiers"],
        summary=_("Show a priority tier"),
        responses={200: OutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        tier = tier_get(user=request.user, slug=slug)
        return Response(self.OutputSerializer(tier).data)
