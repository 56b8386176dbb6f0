"""Benchmark: workload event ingest (events/s) and per-project query times as events pile up.

Run on demand on PostgreSQL (not part of the test suite), from the repository root, in a
database of your own (it works in the throwaway test database ``test_<name>``, dropped at
the end):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench DJANGO_DEBUG=1 \\
        nice .venv/bin/python bench/ingest.py [--checkpoints 1000000,10000000] [--measure 200000]

It builds 200 projects through the governance services, then for each checkpoint:

1. fills the history up to that many stored events with set-based SQL (``generate_series``:
   finished jobs, four events each, one job every 1.25 s going back in time — about the
   event rate of a 10,000-GPU pool; the newest 500 jobs pending and the next 1,000 running,
   so the live queue is the same at every checkpoint), then ``VACUUM ANALYZE``;
2. feeds ``--measure`` new events (synthetic jobs: submitted, pending with a Slurm reason,
   started, ended) through ``events_ingest`` in its batches and times it (building the
   ``JobEvent`` objects is not timed: it is the caller's work);
   It also counts the CPU time the ingest and its PostgreSQL backend used, so that
   ``events_per_cpu_second`` gives the rate on an otherwise idle machine (the wall-clock
   rate on a shared one is lower);
3. times the per-project reads for the busiest project (a tenth of all jobs): the
   why-is-my-job-waiting page's queries, the project workload page's, and the approver's
   summary over the last day and the last 30 days.

It prints the figures and writes them to ``bench/results/ingest-<timestamp>.json``.
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
os.environ.setdefault("DJANGO_DEBUG", "1")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.fixtures import author, tier_review  # noqa: E402
from governance import services as rules  # noqa: E402
from governance.models import (  # noqa: E402
    GpuFlavor,
    PreemptionKind,
    PriorityTier,
    Project,
    SiteRole,
    User,
)
from queues.models import EventKind, JobState, WorkloadJob  # noqa: E402
from queues.selectors import (  # noqa: E402
    job_wait_explanation,
    project_workload,
    project_workload_summary,
)
from queues.services.workload import JobEvent, classify, events_ingest  # noqa: E402

REASONS = ["Resources", "Priority", "QOSGrpGRES", "AssocGrpGRES", "Dependency", "ReqNodeNotAvail"]
BATCH = 5000
SPACING = 1.25  # seconds between two jobs of the history
PENDING, RUNNING = 500, 1000  # the newest jobs of the history: the live queue
FILL_JOBS = 250_000  # jobs per fill statement (about a million events)


def build(projects: int) -> tuple[list[Project], list[PriorityTier], GpuFlavor]:
    ops = User.objects.create_user(username="bench-ops", site_role=SiteRole.OPS)
    kw = author(ops, "benchmark")
    flavor = rules.flavor_create(
        **kw, slug="a100", name="A100", gpu_model="A100", memory_gb=80, gres_type="a100"
    )
    pool = rules.pool_create(**kw, slug="bench", name="Bench")
    rules.pool_capacity_set(**kw, pool=pool, flavor=flavor, gpus=10_000)
    common = tier_review(ops)
    tiers = [
        rules.tier_create(
            **kw, **common, slug=f"t{n}", name=f"T{n}", score=10 * n, scheduler_value=n
        )
        for n in range(1, 5)
    ]
    klass = rules.preemption_class_create(
        **kw, slug="ok", name="OK", kind=PreemptionKind.ALLOWED, business_impact="-"
    )
    made = []
    for n in range(projects):
        project = rules.project_create(**kw, slug=f"p{n}", name=f"P{n}", tier=tiers[n % 4])
        rules.quota_create(
            **kw,
            project=project,
            pool=pool,
            flavor=flavor,
            guarantee=40,
            borrow_limit=10,
            preemption_class=klass,
        )
        made.append(project)
    return made, tiers, flavor


def events(
    start: int,
    jobs: int,
    projects: list[Project],
    tiers: list[PriorityTier],
    flavor: GpuFlavor,
    t0: datetime,
) -> Iterator[JobEvent]:
    """Four events for each of ``jobs`` new jobs, submitted after ``t0``."""
    rng = random.Random(start)
    for j in range(start, start + jobs):
        # The busiest project (p0) gets a tenth of the jobs, the rest spread evenly.
        project = projects[0] if j % 10 == 0 else projects[j % len(projects)]
        submit = t0 + timedelta(seconds=j * 0.05)
        job = f"live{j}"
        submitted = JobEvent(
            event_id=f"{job}:s",
            time=submit,
            kind=EventKind.SUBMITTED,
            source="bench",
            job_id=job,
            scheduler="slurm",
            project=project,
            tier=tiers[j % 4],
            flavor=flavor,
            gpus=rng.choice((1, 2, 4, 8)),
        )
        wait = rng.randint(5, 3600)
        yield submitted
        yield JobEvent(
            event_id=f"{job}:p",
            time=submit + timedelta(seconds=1),
            kind=EventKind.PENDING,
            reason=rng.choice(REASONS),
            source="bench",
            job_id=job,
        )
        yield JobEvent(
            event_id=f"{job}:r",
            time=submit + timedelta(seconds=wait),
            kind=EventKind.STARTED,
            source="bench",
            job_id=job,
        )
        yield JobEvent(
            event_id=f"{job}:e",
            time=submit + timedelta(seconds=wait + rng.randint(60, 86_400)),
            kind=EventKind.ENDED,
            state=JobState.COMPLETED,
            source="bench",
            job_id=job,
        )


FILL_JOBS_SQL = """
INSERT INTO queues_workloadjob (
    source, key, job_id, name, project_id, user_name, tier_id, queue, qos, account, gpus,
    flavor_id, constraints, submitted_at, pending_since, started_at, ended_at, state,
    exit_code, reason, message, category, clears_by_itself, preemptions, gpu_seconds_lost,
    requeues, last_event_at)
SELECT 'bench', 'h' || g, 'h' || g, '', (%(projects)s::int[])[CASE WHEN g %% 10 = 0 THEN 1
        ELSE g %% %(count)s + 1 END],
    'user' || (g %% 50), (%(tiers)s::int[])[g %% 4 + 1], 'gpu', '', '',
    (ARRAY[1, 2, 4, 8])[g %% 4 + 1], %(flavor)s, '', sub,
    CASE WHEN g < %(pending)s THEN sub END,
    CASE WHEN g >= %(pending)s THEN sub + wait END,
    CASE WHEN g >= %(live)s THEN LEAST(sub + wait + run, %(anchor)s) END,
    CASE WHEN g < %(pending)s THEN 'pending' WHEN g < %(live)s THEN 'running'
        ELSE 'completed' END,
    CASE WHEN g >= %(live)s THEN '0:0' ELSE '' END,
    (%(reasons)s::text[])[g %% 6 + 1], '', (%(categories)s::text[])[g %% 6 + 1],
    (%(clears)s::boolean[])[g %% 6 + 1], 0, 0, 0,
    CASE WHEN g < %(pending)s THEN sub + interval '1 second'
        WHEN g < %(live)s THEN sub + wait ELSE LEAST(sub + wait + run, %(anchor)s) END
FROM (
    SELECT g, %(anchor)s - g * %(spacing)s * interval '1 second' AS sub,
        ((g * 7919) %% 1800 + 5) * interval '1 second' AS wait,
        ((g * 104729) %% 86400 + 60) * interval '1 second' AS run
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g
) AS history
"""
FILL_EVENTS_SQL = """
INSERT INTO queues_workloadevent (
    job_id, source, event_id, time, kind, state, reason, message, category, gpus)
SELECT j.id, 'bench', j.key || ':' || k.kind,
    CASE k.n WHEN 0 THEN j.submitted_at WHEN 1 THEN j.submitted_at + interval '1 second'
        WHEN 2 THEN j.started_at ELSE j.ended_at END,
    k.kind,
    CASE k.n WHEN 2 THEN 'running' WHEN 3 THEN 'completed' ELSE 'pending' END,
    CASE k.n WHEN 1 THEN j.reason ELSE '' END, '',
    CASE k.n WHEN 1 THEN j.category ELSE '' END, j.gpus
FROM queues_workloadjob AS j
CROSS JOIN (VALUES (0, 'submitted'), (1, 'pending'), (2, 'started'), (3, 'ended')) AS k (n, kind)
WHERE j.source = 'bench' AND j.id BETWEEN %(low)s AND %(high)s
    AND (k.n < 2 OR (k.n = 2 AND j.started_at IS NOT NULL)
        OR (k.n = 3 AND j.ended_at IS NOT NULL))
ORDER BY j.id, k.n
"""


def backend_cpu_seconds() -> float:
    """CPU seconds the PostgreSQL backend serving this connection has used (same host only)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def events_stored() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM queues_workloadevent")
        return int(cursor.fetchone()[0])


def fill(target: int, filled: int, params: dict[str, Any]) -> int:
    """Add history jobs (from number ``filled`` on) until ``target`` events are stored;
    return the number of history jobs."""
    while True:
        missing = target - events_stored()
        if missing <= 0:
            return filled
        count = min(FILL_JOBS, max(1, missing // 4))
        with connection.cursor() as cursor:
            cursor.execute(
                FILL_JOBS_SQL + " RETURNING id",
                {**params, "first": filled, "last": filled + count - 1},
            )
            ids = [row[0] for row in cursor.fetchall()]
            cursor.execute(FILL_EVENTS_SQL, {"low": min(ids), "high": max(ids)})
        filled += count


def timed(function: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1000, 1)


def queries(project: Project) -> dict[str, float]:
    # The project's oldest pending job: the why-waiting page explains it.
    pending = (
        WorkloadJob.objects.filter(project=project, state=JobState.PENDING)
        .select_related("project", "tier", "flavor", "cluster")
        .order_by("submitted_at")
        .first()
    )
    if pending is None:
        sys.exit(f"No pending job in {project}: the generated workload has none to explain.")
    return {
        "why_waiting_ms": timed(lambda: job_wait_explanation(pending)),
        "project_workload_page_ms": timed(lambda: project_workload(project=project)),
        "approver_summary_1_day_ms": timed(
            lambda: project_workload_summary(project=project, days=1)
        ),
        "approver_summary_30_days_ms": timed(
            lambda: project_workload_summary(project=project, days=30), repeat=3
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", default="1000000,10000000", help="Stored events.")
    parser.add_argument("--measure", type=int, default=200_000, help="Events timed per step.")
    parser.add_argument("--projects", type=int, default=200)
    args = parser.parse_args()
    checkpoints = sorted({int(c) for c in args.checkpoints.split(",") if c})
    if connection.vendor != "postgresql":
        raise SystemExit("bench/ingest.py needs PostgreSQL (set DATABASE_URL)")
    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT version()")
        version = cursor.fetchone()[0]
    results: dict = {
        "database": version,
        "batch": BATCH,
        "measured_events_per_step": args.measure,
        "cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "checkpoints": [],
    }
    try:
        projects, tiers, flavor = build(args.projects)
        anchor = timezone.now().replace(microsecond=0)
        verdicts = [classify(scheduler="slurm", reason=reason) for reason in REASONS]
        params = {
            "projects": [project.pk for project in projects],
            "count": len(projects),
            "tiers": [tier.pk for tier in tiers],
            "flavor": flavor.pk,
            "anchor": anchor,
            "spacing": SPACING,
            "pending": PENDING,
            "live": PENDING + RUNNING,
            "reasons": [verdict.reason for verdict in verdicts],
            "categories": [str(verdict.category) for verdict in verdicts],
            "clears": [verdict.clears_by_itself for verdict in verdicts],
        }
        filled, live = 0, 0
        for checkpoint in checkpoints:
            start = time.perf_counter()
            filled = fill(checkpoint, filled, params)
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE queues_workloadjob")
                cursor.execute("VACUUM ANALYZE queues_workloadevent")
            fill_seconds = time.perf_counter() - start
            jobs = args.measure // 4
            spent, stored, cpu = 0.0, 0, 0.0
            for offset in range(0, jobs, 12_500):  # 50,000 events built, then ingested
                count = min(12_500, jobs - offset)
                batch = list(events(live + offset, count, projects, tiers, flavor, anchor))
                start, cpu_start = time.perf_counter(), time.process_time() + backend_cpu_seconds()
                result = events_ingest(events=batch)
                spent += time.perf_counter() - start
                cpu += time.process_time() + backend_cpu_seconds() - cpu_start
                stored += result.stored
            live += jobs
            row = {
                "stored_events_before": events_stored() - stored,
                "jobs": WorkloadJob.objects.count(),
                "fill_seconds": round(fill_seconds, 1),
                "ingested_now": stored,
                "seconds": round(spent, 2),
                "events_per_second": round(stored / spent),
                # Client and database CPU per event: the rate one otherwise idle core pair
                # would give, whatever else the machine runs (the two work in turn).
                "cpu_seconds": round(cpu, 2),
                "events_per_cpu_second": round(stored / cpu) if cpu else None,
                "load_average": [round(x, 2) for x in os.getloadavg()],
                **queries(projects[0]),
            }
            results["checkpoints"].append(row)
            print(json.dumps(row), flush=True)
    finally:
        connection.creation.destroy_test_db(test_db, verbosity=0)
    out = ROOT / "bench" / "results" / f"ingest-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
