"""Review cycles: the tiers and quotas due for review, and recording a review."""

from typing import Any

from django.http import Http404
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance import selectors, services
from governance.models import Review, ReviewOutcome
from governance.services import REASON_MAX_LENGTH
from governance.toolkit.api import (
    BAD_FILTER,
    BAD_INPUT,
    FORBIDDEN,
    NOT_FOUND,
    ETagMixin,
    LimitOffsetPagination,
    get_paginated_response,
    parse_filters,
)


class ReviewDueOutputSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=[("tier", "tier"), ("quota", "quota")])
    object = serializers.CharField(help_text=_("The tier's slug or the quota's id."))
    name = serializers.CharField()
    next_review_on = serializers.DateField(allow_null=True)
    last_reviewed_on = serializers.DateField(allow_null=True)
    review_cycle_days = serializers.IntegerField()
    overdue = serializers.BooleanField()

    class Meta:
        ref_name = "ReviewDue"


class ReviewDueListApi(ETagMixin, APIView):
    pagination_class = LimitOffsetPagination

    class FilterSerializer(serializers.Serializer):
        kind = serializers.ChoiceField(
            choices=[("tier", "tier"), ("quota", "quota")],
            required=False,
            help_text=_("Only tiers or only quotas."),
        )
        on = serializers.DateField(
            required=False, help_text=_("Due as of this day (YYYY-MM-DD); today when absent.")
        )
        window_days = serializers.IntegerField(
            required=False,
            min_value=0,
            max_value=366,
            help_text=_("Also list reviews due within this many days (14 by default)."),
        )

    @extend_schema(
        operation_id="reviews_due_list",
        tags=["reviews"],
        summary=_("Tiers and quotas whose review is overdue or due soon, the earliest first"),
        parameters=[FilterSerializer],
        responses={200: ReviewDueOutputSerializer(many=True), 400: BAD_FILTER},
        examples=[
            OpenApiExample(
                "A tier due",
                response_only=True,
                value={
                    "count": 1,
                    "next": None,
                    "previous": None,
                    "results": [
                        {
                            "kind": "tier",
                            "object": "key",
                            "name": "Key project",
                            "next_review_on": "2026-12-05",
                            "last_reviewed_on": "2026-09-06",
                            "review_cycle_days": 90,
                            "overdue": False,
                        }
                    ],
                },
            )
        ],
    )
    def get(self, request: Request) -> Response:
        if not selectors.user_can_read_rules(request.user):
            raise Http404
        filters = parse_filters(self.FilterSerializer, request)
        today = filters.get("on") or timezone.localdate()
        window = filters.get("window_days")
        rows: list[dict[str, Any]] = []
        if filters.get("kind") in (None, "tier"):
            for tier in selectors.tiers_due_for_review(today=today, window_days=window):
                rows.append(_due("tier", tier.slug, tier.name, tier, today))
        if filters.get("kind") in (None, "quota"):
            for quota in selectors.quotas_due_for_review(today=today, window_days=window):
                rows.append(_due("quota", str(quota.pk), str(quota), quota, today))
        rows.sort(key=lambda row: (row["next_review_on"] is None, row["next_review_on"]))
        return get_paginated_response(
            serializer_class=ReviewDueOutputSerializer, queryset=rows, request=request, view=self
        )


def _due(kind: str, key: str, name: str, obj: Any, today: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "object": key,
        "name": name,
        "next_review_on": obj.next_review_on,
        "last_reviewed_on": obj.last_reviewed_on,
        "review_cycle_days": obj.review_cycle_days,
        "overdue": obj.next_review_on is not None and obj.next_review_on < today,
    }


class ReviewOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    tier = serializers.SlugField(source="tier.slug", allow_null=True, default=None)
    quota = serializers.IntegerField(source="quota_id", allow_null=True)
    outcome = serializers.ChoiceField(choices=ReviewOutcome.choices)
    notes = serializers.CharField()
    reviewed_by = serializers.CharField(source="reviewed_by.username")
    reviewed_on = serializers.DateField()
    next_review_on = serializers.DateField(allow_null=True)
    change = serializers.IntegerField(
        source="change_id",
        allow_null=True,
        help_text=_("Retire: the rule change proposed to retire the tier."),
    )

    class Meta:
        ref_name = "Review"


class ReviewInputSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=ReviewOutcome.choices)
    notes = serializers.CharField(
        max_length=REASON_MAX_LENGTH, help_text=_("What was checked and what was decided.")
    )
    review_cycle_days = serializers.IntegerField(
        min_value=1,
        max_value=730,
        required=False,
        allow_null=True,
        default=None,
        help_text=_("Review again in this many days; absent: keep the current cycle."),
    )

    class Meta:
        ref_name = "ReviewInput"


REVIEW_EXAMPLE = OpenApiExample(
    "Keep",
    request_only=True,
    value={
        "outcome": "keep",
        "notes": "Waits within target; owners agree.",
        "review_cycle_days": 90,
    },
)
REVIEW_RESPONSES = {201: ReviewOutputSerializer, 400: BAD_INPUT, 403: FORBIDDEN, 404: NOT_FOUND}


def _record(request: Request, **subject: Any) -> Response:
    serializer = ReviewInputSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    review: Review = services.review_record(
        user=selectors.signed_in_user(request), **serializer.validated_data, **subject
    )
    return Response(ReviewOutputSerializer(review).data, status=status.HTTP_201_CREATED)


class TierReviewApi(APIView):
    @extend_schema(
        operation_id="reviews_tier_create",
        tags=["reviews"],
        summary=_("Record a tier's review (ops or its owner); retire proposes a rule change"),
        request=ReviewInputSerializer,
        responses=REVIEW_RESPONSES,
        examples=[REVIEW_EXAMPLE],
    )
    def post(self, request: Request, slug: str) -> Response:
        return _record(request, tier=selectors.tier_get(user=request.user, slug=slug))


class QuotaReviewApi(APIView):
    @extend_schema(
        operation_id="reviews_quota_create",
        tags=["reviews"],
        summary=_("Record a quota's review (ops or the project's lead)"),
        request=ReviewInputSerializer,
        responses=REVIEW_RESPONSES,
        examples=[REVIEW_EXAMPLE],
    )
    def post(self, request: Request, pk: int) -> Response:
        return _record(request, quota=selectors.quota_get(user=request.user, pk=pk))
