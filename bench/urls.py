"""The bench server's URLs: every production URL, plus ``GET /bench/ceiling/``.

The ceiling is the smallest DRF endpoint that still goes through the project's API stack:
the default authentication (a token lookup), permission, throttle and renderer classes,
returning a constant. It is what a request costs before any work of our own, so
``bench/placement.py`` measures ``GET placement`` against it. It is routed where placement
is (just before the queues' URLs, which come first), so that both pay about the same URL
resolution. Only ``bench.settings`` routes here.
"""

from django.urls import URLResolver, include, path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.urls import urlpatterns as production


class CeilingApi(APIView):
    def get(self, request: Request) -> Response:
        return Response({"ok": True})


ceiling = path("", include([path("bench/ceiling/", CeilingApi.as_view(), name="bench_ceiling")]))
at = next(
    index
    for index, pattern in enumerate(production)
    if isinstance(pattern, URLResolver)
    and getattr(pattern.urlconf_name, "__name__", "") == "queues.urls"
)
urlpatterns = [*production[:at], ceiling, *production[at:]]
