"""API rate limits: per token, per user and, for anonymous clients, per address.

Rates come from ``settings.ARBITER_API_RATES`` and ``settings.ARBITER_API_THROTTLE`` at each
request (not from DRF's settings frozen at import), so a deployment sets them in the
environment and tests can switch them. A client over a rate gets a 429 with ``Retry-After``.

Counts are kept in the cache (``ARBITER_CACHE_URL``: Redis, one counter shared by every
process, incremented atomically). Without it, the embedded default cache is per process, so
each web process counts on its own: a limit then holds per process, not per deployment.
"""

import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework import throttling

from governance.models import ApiToken

from .client import client_address


def window_count(key: str, period: int) -> tuple[int, float]:
    """Count one more use of ``key`` in the current fixed window of ``period`` seconds: the
    count so far (this one included) and the seconds until the window ends. One atomic
    increment of a shared counter (Redis ``INCR`` with ``ARBITER_CACHE_URL``)."""
    now = time.time()
    window = int(now // period)
    counter = f"{key}:{window}"
    cache.add(counter, 0, timeout=period + 1)
    try:
        count = cache.incr(counter)
    except ValueError:  # expired between add and incr: a fresh window
        cache.add(counter, 0, timeout=period + 1)
        count = cache.incr(counter)
    return int(count), (window + 1) * period - now


class _Configured:
    scope: str

    def get_rate(self) -> str | None:
        return settings.ARBITER_API_RATES.get(self.scope)

    def allow_request(self, request: Any, view: Any) -> bool:
        """One shared counter per client and window, incremented atomically (``INCR`` in
        Redis): exact under concurrency across processes, unlike DRF's read-modify-write
        history. Windows are fixed (aligned to the rate's period)."""
        if not settings.ARBITER_API_THROTTLE:
            return True
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)  # type: ignore[attr-defined]
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)  # type: ignore[attr-defined]
        if key is None:
            return True
        count, self.wait_seconds = window_count(key, self.duration)
        return bool(count <= self.num_requests)

    def wait(self) -> float | None:
        return max(0.0, getattr(self, "wait_seconds", 0.0))


class TokenRateThrottle(_Configured, throttling.SimpleRateThrottle):
    """Each API token on its own (a CI pipeline with a runaway loop is slowed alone), keyed
    by the token's row, so a token's count survives nothing but its own requests."""

    scope = "token"

    def __init__(self) -> None:  # the rate is read per request
        pass

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        if not isinstance(request.auth, ApiToken):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.auth.pk}


class UserRateThrottle(_Configured, throttling.UserRateThrottle):
    """Each signed-in user, whichever of their tokens or sessions they use."""

    scope = "user"

    def __init__(self) -> None:
        pass

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        if not (request.user and request.user.is_authenticated):
            return None
        return super().get_cache_key(request, view)


class AnonRateThrottle(_Configured, throttling.AnonRateThrottle):
    """Clients without credentials, per address (``client_address``: X-Forwarded-For only
    from a trusted proxy)."""

    scope = "anon"

    def __init__(self) -> None:
        pass

    def get_ident(self, request: Any) -> str:
        return client_address(request) or ""
