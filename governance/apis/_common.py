"""What every API shares: the exception handler, pagination, filter parsing."""

from typing import TYPE_CHECKING, Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework import pagination as drf_pagination
from rest_framework import views as drf_views
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

from governance.selectors import Sorts, required_scope, sort_choices


class ScopedAutoSchema(AutoSchema):
    """drf-spectacular's schema, and each operation says the token scope it needs (the
    description's last line, and ``x-token-scope``)."""

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        scope = required_scope(self.view, self.method)
        line = _("Token scope: %(scope)s.") % {"scope": scope}
        operation["description"] = "\n\n".join(
            str(part) for part in (operation.get("description", ""), line) if part
        )
        operation["x-token-scope"] = scope
        return operation


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, and a ``ValidationError`` raised by a service becomes a 400.

    The body has the shape of serializer errors, ``{"field": ["message", ...]}``, with the
    errors that belong to no field under ``non_field_errors``. DRF's own handler turns
    ``Http404`` into a 404 and ``PermissionDenied`` into a 403 that keeps its message.
    """
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(_validation_error_detail(exc))
    return drf_views.exception_handler(exc, context)


def _validation_error_detail(exc: DjangoValidationError) -> dict[str, Any]:
    detail = serializers.as_serializer_error(exc)
    if NON_FIELD_ERRORS in detail:
        non_field = detail.pop(NON_FIELD_ERRORS)
        detail.setdefault(api_settings.NON_FIELD_ERRORS_KEY, []).extend(non_field)
    return detail


class LimitOffsetPagination(drf_pagination.LimitOffsetPagination):
    """``?limit=&offset=``: ``PAGE_SIZE`` rows unless asked, never more than ``max_limit``.

    A value that is not a whole number (``limit=%``, ``offset=null``, ``limit=``) is a 400
    naming the parameter, where DRF would silently use the default.
    """

    max_limit = 500

    def _parameter(self, request: Request, name: str, *, minimum: int) -> int | None:
        if name not in request.query_params:
            return None
        raw = request.query_params[name]
        if not raw.isascii() or not raw.isdigit() or int(raw) < minimum:
            raise exceptions.ValidationError(
                {name: [_("Enter a whole number of at least %(min)d.") % {"min": minimum}]}
            )
        return int(raw)

    def get_limit(self, request: Request) -> int | None:
        limit = self._parameter(request, self.limit_query_param, minimum=1)
        if limit is None:
            return self.default_limit
        return min(limit, self.max_limit) if self.max_limit else limit

    def get_offset(self, request: Request) -> int:
        return self._parameter(request, self.offset_query_param, minimum=0) or 0


def get_paginated_response(
    *,
    serializer_class: type[serializers.BaseSerializer],
    queryset: QuerySet[Any],
    request: Request,
    view: APIView,
) -> Response:
    """One page of ``queryset`` in the view's pagination: ``count``, ``next``, ``previous``."""
    paginator = view.pagination_class()  # type: ignore[attr-defined]
    page = paginator.paginate_queryset(queryset, request, view=view)
    if page is None:
        return Response(serializer_class(queryset, many=True).data)
    return paginator.get_paginated_response(serializer_class(page, many=True).data)


_VALUE_FIELDS = (
    serializers.DateTimeField,
    serializers.DateField,
    serializers.IntegerField,
    serializers.DecimalField,
    serializers.FloatField,
)


def parse_filters(
    serializer_class: type[serializers.Serializer], request: Request
) -> dict[str, Any]:
    """The validated query parameters (400 when one is invalid); absent ones are left out.

    An instant, a date or a number given empty (``?at=``) is a 400 too: DRF would treat it as
    absent and silently answer for the default. (An empty slug or search, as a form that was
    left empty sends it, still means "no filter".)
    """
    serializer = serializer_class(data=request.query_params)
    blank = {
        name: [_("This field may not be blank.")]
        for name, field in serializer.fields.items()
        if request.query_params.get(name) == "" and isinstance(field, _VALUE_FIELDS)
    }
    if blank:
        raise exceptions.ValidationError(blank)
    serializer.is_valid(raise_exception=True)
    return {key: value for key, value in serializer.validated_data.items() if value is not None}


def slug_filter(queryset: QuerySet[Any], help_text: "StrOrPromise") -> serializers.SlugRelatedField:
    """A query parameter naming an object by slug; an unknown slug is a 400, not a 404."""
    return serializers.SlugRelatedField(
        slug_field="slug", queryset=queryset, required=False, help_text=help_text
    )


def sort_filter(sorts: Sorts) -> serializers.ChoiceField:
    """``?sort=``: one of the list selector's orders (the first when absent)."""
    return serializers.ChoiceField(
        choices=sort_choices(sorts),
        required=False,
        help_text=_("The order of the list; the first choice when absent."),
    )


def search_param(help_text: "StrOrPromise") -> serializers.CharField:
    """``?q=``: text searched for, as the list page's search box does."""
    return serializers.CharField(required=False, max_length=100, help_text=help_text)


def boolean_filter(help_text: "StrOrPromise") -> serializers.BooleanField:
    # allow_null: an absent parameter is None (not given), not False.
    return serializers.BooleanField(required=False, allow_null=True, help_text=help_text)


BAD_FILTER = OpenApiResponse(
    description=_("A query parameter is invalid; the body maps its name to the messages.")
)
NOT_FOUND = OpenApiResponse(description=_("No such object."))


def pool_use_serializer(*, name: str, key: str) -> serializers.Serializer:
    """Capacity against guarantees of one pool and flavor (``key`` is "pool" or "flavor")."""
    return inline_serializer(
        name=name,
        many=True,
        fields={
            key: serializers.SlugField(source=f"{key}.slug"),
            "gpus": serializers.IntegerField(source="capacity"),
            "guaranteed": serializers.IntegerField(
                help_text=_("GPUs guaranteed to the quotas in the pool.")
            ),
            "child_pools": serializers.IntegerField(
                source="child_capacity", help_text=_("GPUs held by the pool's child pools.")
            ),
            "free": serializers.IntegerField(
                help_text=_(
                    "GPUs neither guaranteed nor held by child pools; below 0, overcommitted."
                )
            ),
        },
    )
