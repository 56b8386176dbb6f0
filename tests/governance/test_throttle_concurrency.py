"""The API throttle holds exactly under concurrency: one counter per client and window in
Redis, incremented atomically, shared by every thread and process (DRF's own throttle reads,
appends and writes back a history, so concurrent requests overshoot)."""

import os
import random
import threading
from types import SimpleNamespace

from django.core.cache import caches
from django.test import override_settings

from governance.models import ApiToken
from governance.toolkit.throttles import TokenRateThrottle
from tests.conftest import require_service

CLIENTS = 16
LIMIT = 600


def _redis_url() -> str:
    """The Redis of the tests: ARBITER_CACHE_URL, else the broker's (CI runs one)."""
    for name in ("ARBITER_CACHE_URL", "CELERY_BROKER_URL"):
        url = os.environ.get(name, "")
        if url.startswith("redis://"):
            return url
    return ""


def _redis_available(url: str) -> tuple[bool, str]:
    if not url:
        return False, "set ARBITER_CACHE_URL or CELERY_BROKER_URL to a redis:// URL"
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as error:
        return False, str(error)
    return True, ""


def test_sixteen_concurrent_clients_get_exactly_the_limit(settings):
    url = _redis_url()
    available, why = _redis_available(url)
    require_service("Redis", available, why)
    settings.ARBITER_API_THROTTLE = True
    settings.ARBITER_API_RATES = {**settings.ARBITER_API_RATES, "token": f"{LIMIT}/hour"}
    redis_cache = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}
    # One token (never saved; a fresh id per run keys its counter), 16 clients, 800 requests.
    token = ApiToken(pk=random.randrange(10**12, 10**13))
    allowed = []
    lock = threading.Lock()
    start = threading.Barrier(CLIENTS)

    def client() -> None:
        mine = 0
        start.wait()
        for _request in range(50):
            throttle = TokenRateThrottle()
            request = SimpleNamespace(auth=token, user=None)
            if throttle.allow_request(request, None):
                mine += 1
        with lock:
            allowed.append(mine)
        caches["default"].close()

    with override_settings(CACHES={"default": redis_cache}):
        threads = [threading.Thread(target=client) for _n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    total = sum(allowed)
    assert len(allowed) == CLIENTS
    assert abs(total - LIMIT) <= LIMIT // 100, total
