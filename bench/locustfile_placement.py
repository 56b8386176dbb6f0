"""Locust users of ``bench/placement.py`` (run by it; not on its own).

``BENCH_PATHS`` lists the URLs to request (one is picked at random per request), e.g. the
placement of many projects, tiers and sizes; ``BENCH_TOKEN`` is the API token.
"""

import os
import random

from locust import FastHttpUser, constant, task

PATHS = os.environ.get("BENCH_PATHS", "/bench/ceiling/").split()
HEADERS = {"Authorization": f"Token {os.environ.get('BENCH_TOKEN', '')}"}
NAME = os.environ.get("BENCH_NAME", "endpoint")


class Client(FastHttpUser):
    wait_time = constant(0)

    @task
    def get(self) -> None:
        with self.client.get(
            random.choice(PATHS), headers=HEADERS, name=NAME, catch_response=True
        ) as response:
            if response.status_code != 200:
                response.failure(f"status {response.status_code}")
