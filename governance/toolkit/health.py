"""Probes for orchestrators: ``/healthz`` (the process answers) and ``/readyz`` (it can serve).

Both are answered by a middleware placed first, before the HTTPS redirect, the host check,
sessions and sign-in: a load balancer or the kubelet probes a pod by its address over plain
HTTP, with no session and a ``Host`` that is not a site name. They reveal nothing but which
dependency is down.

``/readyz`` checks, each with a short timeout:

- ``database``: the default database answers a query;
- ``broker``: the Celery broker (Redis in production) accepts a connection;
- ``migrations``: every migration the code has is applied (a web server started before
  ``migrate`` finished is not ready).

It answers 200 with ``{"status": "ready", "checks": {...}}`` when all pass, else 503 with
``"not ready"`` and the failing check's message.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.db import connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, JsonResponse

ALIVE_PATH = "/healthz"
READY_PATH = "/readyz"
BROKER_TIMEOUT_SECONDS = 3


def database_check() -> str:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return "ok"


def broker_check() -> str:
    from kombu import Connection

    url = settings.CELERY_BROKER_URL
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {})
    with Connection(url, transport_options=options, connect_timeout=BROKER_TIMEOUT_SECONDS) as c:
        c.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_SECONDS)
        if url.startswith(("redis://", "rediss://")):
            # A TCP connection alone proves little: ask the server itself.
            c.default_channel.client.ping()
    return "ok"


def migrations_check() -> str:
    connection = connections["default"]
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        pending = ", ".join(f"{m.app_label}.{m.name}" for m, _backwards in plan[:5])
        more = f" and {len(plan) - 5} more" if len(plan) > 5 else ""
        raise RuntimeError(f"{len(plan)} migration(s) not applied: {pending}{more}")
    return "ok"


CHECKS: dict[str, Callable[[], str]] = {
    "database": database_check,
    "broker": broker_check,
    "migrations": migrations_check,
}


def readiness() -> tuple[bool, dict[str, str]]:
    """Run every check; a check that raises is reported by its error, never raised."""
    results: dict[str, str] = {}
    ready = True
    for name, check in CHECKS.items():
        try:
            results[name] = check()
        except Exception as error:  # any failure means "not ready", with its reason
            ready = False
            results[name] = f"{type(error).__name__}: {error}"[:300]
    return ready, results


def _probe(request: HttpRequest) -> HttpResponse | None:
    path = request.path_info.rstrip("/")
    if path not in (ALIVE_PATH, READY_PATH):
        return None
    if request.method not in ("GET", "HEAD"):
        response = JsonResponse({"detail": "Only GET and HEAD."}, status=405)
        response["Allow"] = "GET, HEAD"
        return response
    if path == ALIVE_PATH:
        response = JsonResponse({"status": "alive"})
    else:
        ready, checks = readiness()
        response = JsonResponse(
            {"status": "ready" if ready else "not ready", "checks": checks},
            status=200 if ready else 503,
        )
    response["Cache-Control"] = "no-store"
    return response


class HealthProbeMiddleware:
    """Answers the two probes before any other middleware (see the module's docstring)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return _probe(request) or self.get_response(request)
