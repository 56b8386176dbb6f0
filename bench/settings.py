"""Settings of the benchmarks' server only (never deployed): the production settings plus
the bench URL conf, which adds the framework-ceiling endpoint, and no rate limits (a load
generator is one client making thousands of requests a minute)."""

from governance.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
ARBITER_API_THROTTLE = False
