"""Input that no view should see: NUL bytes and over-long values in the URL, the query
string or a form body. PostgreSQL refuses NUL in text, so without this guard any filter or
field that reaches a query would be a server error; here it is a 400 naming the field."""

from collections.abc import Callable, Iterable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.utils.html import escape
from django.utils.translation import gettext as _

# Longer than any slug, username, filter or search box the pages and the API take.
MAX_PARAMETER_LENGTH = 2000


def _problem(items: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for name, value in items:
        if "\x00" in name or "\x00" in value:
            errors.setdefault(name.replace("\x00", "") or "parameter", []).append(
                _("Null characters are not allowed.")
            )
        elif len(value) > MAX_PARAMETER_LENGTH:
            errors.setdefault(name, []).append(
                _("Ensure this value has at most %(limit)d characters.")
                % {"limit": MAX_PARAMETER_LENGTH}
            )
    return errors


class RejectBadInputMiddleware:
    """400 for a NUL byte in the path, a query parameter or a form field, or a parameter
    longer than ``MAX_PARAMETER_LENGTH``: JSON ``{"field": [...]}`` under ``/api/``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        errors = _problem(
            (name, value) for name in request.GET for value in request.GET.getlist(name)
        )
        if "\x00" in request.path:
            errors.setdefault("path", []).append(_("Null characters are not allowed."))
        if not errors and request.method == "POST" and _is_form(request):
            errors = _problem(
                (name, value) for name in request.POST for value in request.POST.getlist(name)
            )
        if not errors:
            return self.get_response(request)
        if request.path.startswith("/api/"):
            from governance.toolkit.api import error_body  # the API's one error format

            return JsonResponse(error_body(400, errors), status=400)
        lines = "".join(
            f"<li>{escape(name)}: {escape(' '.join(messages))}</li>"
            for name, messages in errors.items()
        )
        title = escape(_("Bad request"))
        return HttpResponseBadRequest(f"<h1>{title}</h1><ul>{lines}</ul>", content_type="text/html")


def _is_form(request: HttpRequest) -> bool:
    content_type = request.META.get("CONTENT_TYPE", "")
    return content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data"))
