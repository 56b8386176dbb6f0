"""The bench server's URLs: every production URL, plus ``GET /bench/ceiling/``.

The ceiling is the smallest DRF endpoint that still goes through the project's API stack:
the default authentication (a token lookup), permission and renderer classes, returning a
constant. It is what a request costs before any work of our own, so ``bench/placement.py``
measures ``GET placement`` against it. Only ``bench.settings`` routes here.
"""

from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.urls import urlpatterns as production


class CeilingApi(APIView):
    def get(self, request: Request) -> Response:
        return Response({"ok": True})


urlpatterns = [path("bench/ceiling/", CeilingApi.as_view(), name="bench_ceiling"), *production]
