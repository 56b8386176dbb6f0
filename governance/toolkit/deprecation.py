"""An API path kept for a deprecation period after its operations moved to a clearer one.

``deprecated_path(View, successor=URL name, operation_ids={method: id})`` is ``View`` under its
old path: it answers exactly as the new path does, and adds the headers that tell a client to
move (RFC 9745 ``Deprecation``, RFC 8594 ``Sunset``, and a ``Link`` to the new path with
``rel="successor-version"``); the OpenAPI schema marks its operations deprecated.
"""

import calendar
from datetime import UTC, datetime
from typing import Any

from django.urls import reverse
from django.utils.http import http_date
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

# When the old paths were deprecated, and when they stop answering (documented in the README).
DEPRECATED_ON = datetime(2026, 12, 3, tzinfo=UTC)
SUNSET_ON = datetime(2027, 6, 30, tzinfo=UTC)


def deprecation_headers(*, successor_url: str) -> dict[str, str]:
    return {
        "Deprecation": f"@{calendar.timegm(DEPRECATED_ON.utctimetuple())}",
        "Sunset": http_date(calendar.timegm(SUNSET_ON.utctimetuple())),
        "Link": f'<{successor_url}>; rel="successor-version"',
    }


def deprecated_path(
    view: type[APIView], *, successor: str, operation_ids: dict[str, str]
) -> type[APIView]:
    """``view`` under an old path: the same answers with the deprecation headers, pointing at
    the URL named ``successor`` (with the same arguments); ``operation_ids``: each method's
    operation id in the schema (ids are unique, so the old path's differ from the new's)."""
    sunset = SUNSET_ON.date().isoformat()

    class Deprecated(view):  # type: ignore[valid-type,misc]
        def finalize_response(
            self, request: Request, response: Response, *args: Any, **kwargs: Any
        ) -> Response:
            response = super().finalize_response(request, response, *args, **kwargs)
            url = request.build_absolute_uri(reverse(successor, kwargs=self.kwargs))
            for name, value in deprecation_headers(successor_url=url).items():
                response[name] = value
            return response

    Deprecated.__name__ = Deprecated.__qualname__ = f"Deprecated{view.__name__}"
    Deprecated.__doc__ = view.__doc__
    schemas = {
        method: extend_schema(
            operation_id=operation_id,
            deprecated=True,
            description=(
                f"Deprecated: this path answers until {sunset}; use the path in the "
                "response's `Link` header (rel=successor-version)."
            ),
        )
        for method, operation_id in operation_ids.items()
    }
    return extend_schema_view(**schemas)(Deprecated)
