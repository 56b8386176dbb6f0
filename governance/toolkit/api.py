"""What every API shares: the exception handler, pagination, filter parsing."""

import hashlib
import io
import json
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    inline_serializer,
)
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

from .examples import (  # noqa: F401  (named here, where the apps import them)
    CHANGE_EXAMPLE_VALUE,
    captured_example,
    change_example,
    page_example,
    response_example,
)


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


# One error format for every API response that is not a success:
# ``{"error": <code>, "detail": <text>, "fields": {<name>: [<message>, ...]}}``.
ERROR_CODES = {
    400: "invalid",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    412: "precondition_failed",
    413: "body_too_large",
    415: "unsupported_media_type",
    429: "throttled",
}


class BodyTooLarge(exceptions.APIException):
    """A request body over the endpoint's limit: a 413 that names the limit."""

    status_code = 413
    default_code = "body_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(
            _("The request body is larger than the %(limit)s bytes this endpoint accepts.")
            % {"limit": f"{limit:,}"}
        )


def body_read(request: Request, *, limit: int) -> None:
    """Read ``request``'s body now, up to ``limit`` bytes (an endpoint's own limit, above the
    site's ``DATA_UPLOAD_MAX_MEMORY_SIZE``); more is a ``BodyTooLarge``."""
    django_request = request._request
    try:
        length = int(django_request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit:
        raise BodyTooLarge(limit)
    if hasattr(django_request, "_body") or getattr(django_request, "_read_started", False):
        return
    body = django_request.read(limit + 1)
    if len(body) > limit:
        raise BodyTooLarge(limit)
    django_request._body = body  # what HttpRequest.body keeps; its own check is skipped
    django_request._stream = io.BytesIO(body)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler in the API's one error format; a service's ``ValidationError`` is a 400.

    Every error body is ``{"error": code, "detail": text, "fields": {...}}``: ``fields`` maps
    each invalid field (or query parameter) to its messages, with the errors that belong to
    no field under ``non_field_errors``; it is empty for errors that are not about input.
    DRF's own handler turns ``Http404`` into a 404 and ``PermissionDenied`` into a 403 that
    keeps its message, and sets ``Retry-After`` on a 429.
    """
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(_validation_error_detail(exc))
    if isinstance(exc, RequestDataTooBig):
        exc = BodyTooLarge(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    response = drf_views.exception_handler(exc, context)
    if response is None:
        return None
    response.data = error_body(response.status_code, response.data, exc)
    return response


def error_body(status_code: int, data: Any, exc: Exception | None = None) -> dict[str, Any]:
    """``data`` (DRF's error detail) in the API's error format."""
    code = ERROR_CODES.get(status_code, "error")
    if isinstance(exc, exceptions.APIException) and status_code not in (400, 404):
        codes = exc.get_codes()
        if isinstance(codes, str) and codes not in ("error", "invalid"):
            code = codes
    is_detail = isinstance(data, dict) and set(data) == {"detail"}
    if exc is None or isinstance(exc, exceptions.ValidationError) or not is_detail:
        if isinstance(data, dict):
            fields = {str(key): _messages(value) for key, value in data.items()}
        else:
            fields = {api_settings.NON_FIELD_ERRORS_KEY: _messages(data)}
        first = _first_message(fields)
        detail = first if len(fields) == 1 and first else str(_("The input is invalid."))
        return {"error": code, "detail": detail, "fields": fields}
    return {"error": code, "detail": str(data["detail"]), "fields": {}}


def _first_message(value: Any) -> str:
    """The first message in nested errors (a list per field, a dict per item), or ""."""
    items = value.values() if isinstance(value, dict) else value
    for item in items if isinstance(items, (list, type({}.values()))) else [items]:
        found = item if isinstance(item, str) else _first_message(item)
        if found:
            return found
    return ""


def _messages(value: Any) -> Any:
    if isinstance(value, list):
        if all(isinstance(item, str) for item in value):
            return [str(item) for item in value]
        return [_messages(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _messages(item) for key, item in value.items()}
    return [str(value)]


def _validation_error_detail(exc: DjangoValidationError) -> dict[str, Any]:
    detail = serializers.as_serializer_error(exc)
    if NON_FIELD_ERRORS in detail:
        non_field = detail.pop(NON_FIELD_ERRORS)
        detail.setdefault(api_settings.NON_FIELD_ERRORS_KEY, []).extend(non_field)
    return detail


class Conflict(exceptions.APIException):
    status_code = 409
    default_detail = _("The request conflicts with an earlier one.")
    default_code = "conflict"


class ErrorSerializer(serializers.Serializer):
    """The body of every error response."""

    error = serializers.CharField(
        help_text=_(
            "A stable code: invalid, not_authenticated, permission_denied, not_found, "
            "conflict, throttled, …"
        )
    )
    detail = serializers.CharField(help_text=_("What went wrong, in the reader's language."))
    # The metaclass moves declared fields away, so this does not shadow ``.fields``.
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.JSONField(),
        help_text=_(
            "Each invalid field or query parameter with its messages (non_field_errors: "
            "those of no single field); empty when the error is not about the input."
        ),
    )

    class Meta:
        ref_name = "Error"


def error_response(description: Any, *, example: dict[str, Any] | None = None) -> OpenApiResponse:
    """An error response in the schema: the error format, described, with an example."""
    examples = []
    if example is not None:
        examples = [OpenApiExample(str(example.get("error", "error")), value=example)]
    return OpenApiResponse(response=ErrorSerializer, description=description, examples=examples)


class ETagSchema(ScopedAutoSchema):
    """A read with an ETag: ``If-None-Match`` and the 304 answer in the schema."""

    def get_override_parameters(self) -> list[Any]:
        parameters = list(super().get_override_parameters())
        if self.method == "GET":
            parameters.append(IF_NONE_MATCH)
        return parameters

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if self.method == "GET" and direction == "response":
            responses["304"] = {
                "description": str(
                    _("Not modified: the ETag given in If-None-Match still holds (no body).")
                )
            }
        return responses

    def _get_response_headers_for_code(self, status_code: Any, direction: Any = "response") -> Any:
        headers = super()._get_response_headers_for_code(status_code, direction)
        if self.method == "GET" and str(status_code) in ("200", "304"):
            headers = dict(headers or {})
            headers["ETag"] = {
                "schema": {"type": "string"},
                "description": str(_("The version of the body, for If-None-Match.")),
            }
        return headers


class ETagMixin(APIView):
    """ETag on a successful read, and 304 Not Modified when ``If-None-Match`` names it.

    The tag is a hash of the JSON body as rendered for this request (its language, its
    page), so it changes whenever anything shown changes; a 304 carries the tag and no body.
    """

    schema = ETagSchema()

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        if request.method not in ("GET", "HEAD") or response.status_code != 200:
            return response
        if getattr(response, "data", None) is None:
            return response
        body = json.dumps(response.data, sort_keys=True, cls=DjangoJSONEncoder)
        etag = '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'
        response["ETag"] = etag
        asked = request.headers.get("If-None-Match", "")
        if asked.strip() == "*" or etag in [
            tag.strip().removeprefix("W/") for tag in asked.split(",")
        ]:
            response.status_code = 304
            response.data = None
        return response


IF_NONE_MATCH = OpenApiParameter(
    name="If-None-Match",
    location=OpenApiParameter.HEADER,
    required=False,
    type=str,
    description=_("An ETag from an earlier answer: 304 Not Modified when nothing changed."),
)


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
    queryset: QuerySet[Any] | list[Any],
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


BAD_FILTER = error_response(
    _("A query parameter is invalid; fields maps its name to the messages."),
    example={
        "error": "invalid",
        "detail": "Enter a whole number of at least 1.",
        "fields": {"limit": ["Enter a whole number of at least 1."]},
    },
)
BAD_INPUT = error_response(
    _("The input is invalid; fields maps each field to its messages."),
    example={
        "error": "invalid",
        "detail": "This field is required.",
        "fields": {"reason": ["This field is required."]},
    },
)
NOT_FOUND = error_response(
    _("No such object, or not one you may see."),
    example={"error": "not_found", "detail": "No Project matches the given query.", "fields": {}},
)
FORBIDDEN = error_response(
    _("Not allowed for this user or token."),
    example={
        "error": "permission_denied",
        "detail": "You do not have permission to perform this action.",
        "fields": {},
    },
)
CONFLICT = error_response(
    _("Conflicts with an earlier call (e.g. an idempotency key reused with another body)."),
    example={
        "error": "conflict",
        "detail": "This Idempotency-Key was used with a different request body.",
        "fields": {},
    },
)


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
