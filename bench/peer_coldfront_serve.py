"""Serve ColdFront's pages to bench/peer_coldfront.py, measured inside ColdFront's own process.

Runs in ColdFront's virtual environment with ColdFront's settings (never imported by Arbiter).
bench/peer_coldfront.py starts it once and keeps it open: for each line it reads on stdin (a
path), it gets the page with Django's test Client signed in as ``bench-ops`` (staff,
superuser) and answers one line on stdout, ``@@`` then JSON: the status, the wall time and
the CPU time of this process (``time.process_time``) around the request, the number of SQL
queries and the size of the response. So the peer's CPU is that of the process that renders
it, as Arbiter's is measured in the process that renders Arbiter's pages.
"""

import json
import os
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coldfront.config.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402


def main() -> None:
    settings.ALLOWED_HOSTS = ["testserver"]
    setup_test_environment()
    client = Client()
    client.force_login(get_user_model().objects.get(username="bench-ops"))
    print("@@" + json.dumps({"ready": True, "django": django.get_version()}), flush=True)
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        connection.queries_log.clear()  # a page of more than 9,000 queries is still counted
        with CaptureQueriesContext(connection) as queries:
            began, cpu = time.perf_counter(), time.process_time()
            response = client.get(path)
            content = response.content
            elapsed = time.perf_counter() - began
            cpu = time.process_time() - cpu
        answer = {
            "status": response.status_code,
            "wall": elapsed,
            "cpu": cpu,
            "db": sum(float(q["time"]) for q in queries.captured_queries),
            "queries": len(queries),
            "bytes": len(content),
        }
        print("@@" + json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
