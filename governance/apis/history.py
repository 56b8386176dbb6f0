"""History per rule: who changed what, when, why and through which rule change."""

from collections.abc import Callable
from typing import Any

from django.db import models
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import GpuFlavor, Pool, PreemptionClass, PriorityTier, Project, Quota
from governance.selectors import (
    flavor_get,
    object_history_sections,
    pool_get,
    preemption_class_get,
    project_get,
    quota_get,
    tier_get,
)
from governance.toolkit.api import (
    NOT_FOUND,
    ETagMixin,
    LimitOffsetPagination,
    get_paginated_response,
)


class HistoryEntryOutputSerializer(serializers.Serializer):
    at = serializers.DateTimeField(source="entry.when")
    user = serializers.CharField(source="entry.user.username", allow_null=True, default=None)
    reason = serializers.CharField(source="entry.reason")
    action = serializers.CharField(
        source="entry.action", help_text=_("created, changed or deleted")
    )
    section = serializers.CharField(
        help_text=_("What the row is about: the object itself, a member, a pool's capacity.")
    )
    subject = serializers.CharField(
        source="entry.subject", help_text=_("The member or the flavor, for those sections.")
    )
    change = serializers.IntegerField(
        source="entry.change_id",
        allow_null=True,
        help_text=_("The rule change that wrote the row, if any."),
    )
    changes = inline_serializer(
        name="HistoryFieldChange",
        many=True,
        source="entry.changes",
        fields={
            "field": serializers.CharField(),
            "old": serializers.CharField(),
            "new": serializers.CharField(),
        },
    )

    class Meta:
        ref_name = "HistoryEntry"


EXAMPLE = OpenApiExample(
    "A guarantee raised through a change",
    response_only=True,
    value={
        "count": 1,
        "next": None,
        "previous": None,
        "results": [
            {
                "at": "2026-11-20T09:12:00Z",
                "user": "ops2",
                "reason": "Model v3 needs more A100 until March",
                "action": "changed",
                "section": "quota",
                "subject": "",
                "change": 14,
                "changes": [{"field": "Guarantee (GPUs)", "old": "24", "new": "28"}],
            }
        ],
    },
)


def _history_api(
    model: type[models.Model], get: Callable[..., models.Model], *, tag: str, key: str
) -> type[APIView]:
    def get_history(self: Any, request: Request, **kwargs: Any) -> Response:
        obj = get(user=request.user, **{key: kwargs[key]})
        rows: list[dict[str, Any]] = [
            {"entry": entry, "section": section.name}
            for section in object_history_sections(obj=obj)
            for entry in section.entries
        ]
        rows.sort(key=lambda row: row["entry"].when, reverse=True)
        return get_paginated_response(
            serializer_class=HistoryEntryOutputSerializer, queryset=rows, request=request, view=self
        )

    decorated = extend_schema(
        operation_id=f"{tag.replace('-', '_')}_history_list",
        tags=[tag],
        summary=_("Its history, newest first: who changed what, when, why, through which change"),
        responses={200: HistoryEntryOutputSerializer(many=True), 404: NOT_FOUND},
        examples=[EXAMPLE],
    )(get_history)
    return type(
        f"{model.__name__}HistoryApi",
        (ETagMixin, APIView),
        {"pagination_class": LimitOffsetPagination, "get": decorated},
    )


ProjectHistoryApi = _history_api(Project, project_get, tag="projects", key="slug")
FlavorHistoryApi = _history_api(GpuFlavor, flavor_get, tag="flavors", key="slug")
PoolHistoryApi = _history_api(Pool, pool_get, tag="pools", key="slug")
TierHistoryApi = _history_api(PriorityTier, tier_get, tag="tiers", key="slug")
PreemptionClassHistoryApi = _history_api(
    PreemptionClass, preemption_class_get, tag="preemption-classes", key="slug"
)
QuotaHistoryApi = _history_api(Quota, quota_get, tag="quotas", key="pk")
