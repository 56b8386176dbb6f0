"""Benchmark: workload event ingest (events/s) and per-project query times as events pile up.

Run on demand on PostgreSQL (not part of the test suite), from the repository root:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter DJANGO_DEBUG=1 \\
        .venv/bin/python bench/ingest.py [--events 1000000] [--checkpoints 1000000,10000000]

It builds 200 projects through the governance services in a throwaway test database, then
feeds synthetic jobs (4 events each: submitted, pending with a Slurm reason, started, ended)
through ``events_ingest`` in batches of 5,000, and at each checkpoint times the per-project
reads (the why-is-my-job-waiting evidence, the project's jobs page and the approver's 30-day
summary) for the busiest project. It prints the figures and writes them to
``bench/results/ingest-<timestamp>.json``.
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
os.environ.setdefault("DJANGO_DEBUG", "1")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402

from governance import services as rules  # noqa: E402
from governance.models import PreemptionKind, SiteRole, User  # noqa: E402
from queues.models import EventKind, JobState, WorkloadEvent, WorkloadJob  # noqa: E402
from queues.selectors import (  # noqa: E402
    job_wait_explanation,
    project_workload,
    project_workload_summary,
)
from queues.services.workload import JobEvent, events_ingest  # noqa: E402

REASONS = ["Resources", "Priority", "QOSGrpGRES", "AssocGrpGRES", "Dependency", "ReqNodeNotAvail"]
BATCH = 5000


def build(projects: int):  # type: ignore[no-untyped-def]
    ops = User.objects.create_user(username="bench-ops", site_role=SiteRole.OPS)
    kw = {"user": ops, "reason": "benchmark"}
    flavor = rules.flavor_create(
        **kw, slug="a100", name="A100", gpu_model="A100", memory_gb=80, gres_type="a100"
    )
    pool = rules.pool_create(**kw, slug="bench", name="Bench")
    rules.pool_capacity_set(**kw, pool=pool, flavor=flavor, gpus=10_000)
    common = {"eligibility": "Any", "confirmed_by": "Ops", "review_cycle_days": 90, "owner": ops}
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


def events(start: int, count: int, projects, tiers, flavor, t0: datetime):  # type: ignore[no-untyped-def]
    rng = random.Random(start)
    jobs = count // 4
    for j in range(start // 4, start // 4 + jobs):
        # The busiest project (p0) gets a tenth of the jobs, the rest spread evenly.
        project = projects[0] if j % 10 == 0 else projects[j % len(projects)]
        submit = t0 + timedelta(seconds=j * 3)
        job = str(j)
        head = {
            "source": "bench",
            "job_id": job,
            "scheduler": "slurm",
            "project": project,
            "tier": tiers[j % 4],
            "flavor": flavor,
            "gpus": rng.choice((1, 2, 4, 8)),
        }
        wait = rng.randint(5, 3600)
        yield JobEvent(event_id=f"{job}:s", time=submit, kind=EventKind.SUBMITTED, **head)
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


def timed(function, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1000, 1)


def queries(project) -> dict[str, float]:  # type: ignore[no-untyped-def]
    # A few pending jobs of the busiest project, so the wait page has something to explain.
    pending = WorkloadJob.objects.filter(project=project).order_by("-pk").first()
    return {
        "why_waiting_ms": timed(lambda: job_wait_explanation(pending)),
        "project_jobs_page_ms": timed(lambda: project_workload(project=project)),
        "approver_30_day_summary_ms": timed(lambda: project_workload_summary(project=project)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--checkpoints", default="", help="Event counts to time the reads at.")
    parser.add_argument("--projects", type=int, default=200)
    args = parser.parse_args()
    checkpoints = sorted({int(c) for c in args.checkpoints.split(",") if c} | {args.events})
    if connection.vendor != "postgresql":
        print("warning: not PostgreSQL; the figures are not the ones the issue asks for")
    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    results: dict = {"database": connection.vendor, "batch": BATCH, "checkpoints": []}
    try:
        projects, tiers, flavor = build(args.projects)
        t0 = datetime(2026, 1, 1, tzinfo=UTC)
        done, elapsed = 0, 0.0
        for checkpoint in checkpoints:
            count = checkpoint - done
            start = time.perf_counter()
            result = events_ingest(events=events(done, count, projects, tiers, flavor, t0))
            spent = time.perf_counter() - start
            elapsed += spent
            done = checkpoint
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE queues_workloadevent")
                cursor.execute("ANALYZE queues_workloadjob")
            row = {
                "stored_events": WorkloadEvent.objects.count(),
                "jobs": WorkloadJob.objects.count(),
                "ingested_now": result.stored,
                "seconds": round(spent, 1),
                "events_per_second": round(result.stored / spent),
                **queries(projects[0]),
            }
            results["checkpoints"].append(row)
            print(json.dumps(row))
    finally:
        connection.creation.destroy_test_db(test_db, verbosity=0)
    out = ROOT / "bench" / "results" / f"ingest-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
