"""Search-as-you-type for filter fields: users by the start of their username or name,
projects by the start of their slug or a part of their name.

``static/js/lookup.js`` asks ``/api/v1/lookup/<kind>/?q=`` as the user types and offers the
answers as suggestions of a text input, so no page lists every user or project. Any signed-in
user may ask (users and projects are visible to every member of the organisation); answers
are paged with ``limit`` and ``offset``, at most ``LookupPagination.max_limit`` at a time, and
``count`` says how many match, up to ``LookupPagination.max_count``.
"""

from typing import Any

from django.http import Http404
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.selectors import project_lookup, user_can_read_rules, user_lookup
from governance.toolkit.api import (
    BAD_FILTER,
    LimitOffsetPagination,
    captured_example,
    get_paginated_response,
    parse_filters,
)


class LookupPagination(LimitOffsetPagination):
    default_limit = 10
    max_limit = 20
    max_count = 1000

    def get_count(self, queryset: Any) -> int:
        """The matches, counted up to ``max_count``: suggestions need no more, and counting
        every match of a short prefix would read as many rows as the table holds."""
        return int(queryset[: self.max_count].count())


class _UserSerializer(serializers.Serializer):
    value = serializers.CharField(source="username", help_text=_("What the filter takes."))
    label = serializers.SerializerMethodField(  # type: ignore[assignment]
        help_text=_(
            "The full name with the username beside it (two people may share a name, never "
            "a username); the username alone when there is no name."
        )
    )

    def get_label(self, user: Any) -> str:
        return str(user.picker_label)


class _ProjectSerializer(serializers.Serializer):
    value = serializers.CharField(source="slug", help_text=_("What the filter takes."))
    label = serializers.CharField(source="name")  # type: ignore[assignment]


LOOKUPS = {
    "users": (user_lookup, _UserSerializer),
    "projects": (project_lookup, _ProjectSerializer),
}


class LookupApi(APIView):
    pagination_class = LookupPagination

    class FilterSerializer(serializers.Serializer):
        q = serializers.CharField(
            required=False,
            max_length=100,
            help_text=_(
                "The start of a username, a first or last name or a slug, or a part of a "
                "project's name."
            ),
        )

    class OutputSerializer(serializers.Serializer):
        value = serializers.CharField(help_text=_("A username or a project slug."))
        label = serializers.CharField(  # type: ignore[assignment]
            help_text=_("A person's or project's name.")
        )

        class Meta:
            ref_name = "LookupItem"

    @extend_schema(
        operation_id="lookup_list",
        examples=[captured_example("lookup_list")],
        tags=["lookup"],
        summary=_("Suggestions for a filter field: users or projects matching q"),
        description=_("The count of matches stops at 1,000: type more to narrow them."),
        parameters=[
            OpenApiParameter(
                "kind",
                str,
                OpenApiParameter.PATH,
                enum=list(LOOKUPS),
                description=_("What to find."),
            ),
            FilterSerializer,
        ],
        responses={200: OutputSerializer(many=True), 400: BAD_FILTER},
    )
    def get(self, request: Request, kind: str) -> Response:
        if kind not in LOOKUPS or not user_can_read_rules(request.user):
            raise Http404
        select, serializer_class = LOOKUPS[kind]
        filters = parse_filters(self.FilterSerializer, request)
        return get_paginated_response(
            serializer_class=serializer_class,
            queryset=select(q=filters.get("q", "").strip()),
            request=request,
            view=self,
        )
