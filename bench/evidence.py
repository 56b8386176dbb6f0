"""Benchmark: the approver's workload summary (``project_workload_summary``) of a busy project
with a month of history, beside the former read of the raw jobs.

Run on demand on PostgreSQL (not part of the test suite), from the repository root:

    DATABASE_URL=postgres://USER@HOST:5432/DB DJANGO_DEBUG=1 nice .venv/bin/python \\
        bench/evidence.py [--month-jobs 1000000] [--rounds 15] [--rebuild]

The month is ``bench/review.py``'s (100 projects, ``--month-jobs`` jobs in October 2026 with
their events, the hourly rollup and the first waits, generated set-based), built once into a
database of its own, ``<DB>_evidence``, and reused by the next runs (``--rebuild`` builds it
again). The rollup's state is set as a run at the month's end leaves it, and the summary of
the busiest project (a hundredth of the month's jobs) is read for the 30 days to the month's
end, ``--rounds`` times after a warm-up: the median and fastest CPU time of this process
(``time.process_time``: what the load of a shared machine inflates least), the median wall
time and the database's part of it (its wall time, and the CPU time of the database's
backend, read from ``/proc``: the server runs on this machine), and the queries; then the
same figures from the raw jobs (``recent_waits`` and ``usage_over``, the former read), and
whether both agree. It prints the figures and writes them to
``bench/results/evidence-<timestamp>.json``. Target: under 50 ms (this process's CPU and the
database's together).
"""

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
os.environ.setdefault("DJANGO_DEBUG", "1")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import DEFAULT_DB_ALIAS, connection, connections  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from bench import review  # noqa: E402
from governance.models import Project, User  # noqa: E402
from queues.models import RollupState  # noqa: E402
from queues.models.rollup import ROLLUP_NAME  # noqa: E402
from queues.selectors import project_workload_summary  # noqa: E402
from queues.selectors.workload import recent_waits, usage_over  # noqa: E402

TARGET_MS = 50
FINISHED = "bench-evidence-finished"  # a marker user: the build of this database completed


def _use(name: str) -> None:
    settings_dict = {**connections.settings[DEFAULT_DB_ALIAS], "NAME": name}
    connections[DEFAULT_DB_ALIAS] = connections[DEFAULT_DB_ALIAS].__class__(
        settings_dict, DEFAULT_DB_ALIAS
    )


def prepare(name: str, month_jobs: int, *, rebuild: bool) -> None:
    """The database ``name`` with a month of ``month_jobs`` jobs: reused when a finished one
    exists (migrated to the code's schema), else generated (``bench/review.py``'s month)."""
    with connection._nodb_cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        exists = cursor.fetchone() is not None
    if exists and not rebuild:
        _use(name)
        call_command("migrate", verbosity=0, interactive=False)
        if User.objects.filter(username=FINISHED).exists():
            print(f"{name}: reused", flush=True)
            return
    with connection._nodb_cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        cursor.execute(f'CREATE DATABASE "{name}"')
    _use(name)
    call_command("migrate", verbosity=0, interactive=False)
    began = time.perf_counter()
    ids = review.build()
    review.generate_jobs(ids, review.MONTH, review.MONTH_END, month_jobs, "m0", review.MONTH_END)
    review.generate_events(0, full=True)
    review.generate_hours(0, review.MONTH_END)
    review.generate_waits(0)
    review.analyze()
    User.objects.create_user(username=FINISHED, is_active=False)
    print(f"{name}: generated {month_jobs} jobs in {time.perf_counter() - began:.0f} s", flush=True)


def _backend_cpu() -> float | None:
    """CPU seconds this connection's database backend has used (when on this machine)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(fn: Callable[[], object], rounds: int) -> dict[str, float | None]:
    """``fn`` ``rounds`` times after a warm-up: CPU (this process), wall and database time
    (the queries' wall time, and the database backend's CPU time over all rounds, per round:
    clock ticks, so a mean)."""
    fn()
    cpu, wall, db = [], [], []
    backend = _backend_cpu()
    for _ in range(rounds):
        with CaptureQueriesContext(connection) as queries:
            began, cpu_began = time.perf_counter(), time.process_time()
            fn()
            cpu.append(time.process_time() - cpu_began)
            wall.append(time.perf_counter() - began)
        db.append(sum(float(query["time"]) for query in queries.captured_queries))
    backend_after = _backend_cpu()
    return {
        "cpu_ms_median": round(1000 * statistics.median(cpu), 1),
        "cpu_ms_min": round(1000 * min(cpu), 1),
        "wall_ms_median": round(1000 * statistics.median(wall), 1),
        "database_ms_median": round(1000 * statistics.median(db), 1),
        "database_cpu_ms_mean": (
            None
            if backend is None or backend_after is None
            else round(1000 * (backend_after - backend) / rounds, 1)
        ),
        "queries": len(queries),
    }


def measure(rounds: int) -> dict[str, Any]:
    at = review.MONTH_END  # the rollup's watermark: no job is submitted after it
    RollupState.objects.update_or_create(
        name=ROLLUP_NAME, defaults={"watermark": at, "last_job_id": review.max_id()}
    )
    project = Project.objects.get(slug="p0")
    since = at.replace(minute=0, second=0, microsecond=0) - timedelta(days=30)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM queues_workloadjob WHERE project_id = %s AND submitted_at >= %s",
            [project.pk, since],
        )
        jobs = cursor.fetchone()[0]

    def summary() -> dict[str, Any]:
        return project_workload_summary(project=project, at=at)

    def former() -> tuple[dict[int, dict[str, dict[str, int]]], dict[str, float]]:
        return (
            recent_waits(project_ids=[project.pk], since=since, now=at),
            usage_over(project=project, since=since, until=at),
        )

    new = summary()
    raw_waits, raw_usage = former()
    waits = {
        w["category"]: {k: v for k, v in w.items() if k not in ("category", "label")}
        for w in new["waits"]
    }
    return {
        "jobs_of_the_project_in_30_days": jobs,
        "summary_from_rollup": timed(summary, rounds),
        "former_read_of_raw_jobs": timed(former, max(3, rounds // 5)),
        "same_usage": new["usage"] == raw_usage,
        "same_waits": waits == dict(raw_waits.get(project.pk, {})),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--month-jobs", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("bench/evidence.py needs PostgreSQL (DATABASE_URL).")
    prepare(f"{connection.settings_dict['NAME']}_evidence", args.month_jobs, rebuild=args.rebuild)
    results = {"database": "postgresql", "month_jobs": args.month_jobs, "target_ms": TARGET_MS}
    results.update(measure(args.rounds))
    connection.close()
    figures = results["summary_from_rollup"]
    print(json.dumps(results, indent=2))
    cpu = figures["cpu_ms_median"] or 0.0
    database_cpu = figures["database_cpu_ms_mean"]
    verdict = "yes" if database_cpu is not None and cpu + database_cpu < TARGET_MS else "NO"
    print(
        f"summary: {cpu} ms CPU + {database_cpu} ms database CPU "
        f"({figures['database_ms_median']} ms of queries' wall), {figures['queries']} queries; "
        f"under {TARGET_MS} ms: {verdict}"
    )
    out = ROOT / "bench" / "results" / f"evidence-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
