"""Benchmark: the monthly review's metrics (``reports.selectors.review_metrics``) at scale.

Run on demand on PostgreSQL (not part of the test suite), from the repository root:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter DJANGO_DEBUG=1 \\
        nice .venv/bin/python bench/review.py [--month-jobs 1000000] [--history-months 9]

It builds 100 projects (4 tiers, 2 pools × 2 flavors, 20,000 GPUs) through the governance
services in a throwaway test database, then generates with set-based SQL
(``generate_series``; no Python loop over rows):

1. the reviewed month (October 2026): ``--month-jobs`` jobs submitted in it, with waits and
   run times drawn from exponential distributions, 20 % of waits on quota, 1 % preempted
   (preempted, requeued, restarted), 2 % failed, the last hours' jobs still waiting at the
   month's end; with their events (submitted, started, ended: 3–6 per job);
2. the hourly rollup (``queues.WorkloadHour``: GPU-seconds run, quota-waiting job-seconds
   per hour × pool × flavor × project × tier) and the first waits (``queues.WorkloadWait``)
   of those jobs, set-based, with the same definitions as
   ``queues.services.workload.rollup``;

and times ``review_metrics`` for the month (the median of 3 runs, after one warm-up; both kinds
of wait percentile, every job's and the started jobs' own, come from the same pass), the
build's ``review_metrics_by_project`` for the month (the site and every project's view), and
``review_metrics`` for one week of it, each with the database backend's CPU seconds and the
load average next to the wall clock (the machine may be shared), and before and after them
the time of a fixed reference query (sorting and summing 1 M numbers: ``reference``), which
tells a slow phase of a shared machine from a slower review; and each query of the build
alone, one after another (``parts``: where the build's database CPU goes). Then it adds
``--history-months`` earlier months of as many jobs each (only the jobs' rare events:
preemptions, requeues, failures), 10 M stored jobs by default, and times the same reviews
again: the cost must follow the window, not the history.

It prints the figures and writes them to ``bench/results/review-<timestamp>.json``; the test
database (``<DB>_review``) is dropped at the end, unless ``--keep``; ``--reuse`` times a kept
one again.
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

from django.conf import settings  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from bench.fixtures import author, tier_review  # noqa: E402
from governance import services as rules  # noqa: E402
from governance.models import PreemptionKind, SiteRole, User  # noqa: E402
from reports.selectors import review_metrics, review_metrics_by_project  # noqa: E402
from reports.selectors.review import _queries as review_queries  # noqa: E402
from reports.selectors.review import _settings as review_settings  # noqa: E402
from reports.selectors.review._common import Names, Scope, tables  # noqa: E402

MONTH = datetime(2026, 10, 1, tzinfo=UTC)
MONTH_END = datetime(2026, 11, 1, tzinfo=UTC)
PROJECTS = 100


def build() -> dict[str, list[int]]:
    """Rules through the services: pools, flavors, tiers, projects and their quotas."""
    ops = User.objects.create_user(username="bench-ops", site_role=SiteRole.OPS)
    kw = author(ops, "benchmark")
    flavors = [
        rules.flavor_create(**kw, slug=slug, name=slug.upper(), gpu_model=slug, memory_gb=80)
        for slug in ("a100", "h100")
    ]
    pools = [rules.pool_create(**kw, slug=f"pool{n}", name=f"Pool {n}") for n in range(2)]
    for pool in pools:
        rules.pool_capacity_set(**kw, pool=pool, flavor=flavors[0], gpus=6000)
        rules.pool_capacity_set(**kw, pool=pool, flavor=flavors[1], gpus=4000)
    common = tier_review(ops)
    tiers = [
        rules.tier_create(
            **kw, **common, slug=f"t{n}", name=f"T{n}", score=10 * n, scheduler_value=n
        )
        for n in range(1, 5)
    ]
    for tier in tiers:
        rules.tier_update(tier=tier, **kw, data={"wait_alert_minutes": 60})
    klass = rules.preemption_class_create(
        **kw, slug="ok", name="OK", kind=PreemptionKind.ALLOWED, business_impact="-"
    )
    project_ids, tier_ids, pool_ids = [], [], []
    for n in range(PROJECTS):
        project = rules.project_create(**kw, slug=f"p{n}", name=f"P{n}", tier=tiers[n % 4])
        for flavor in flavors:
            rules.quota_create(
                **kw,
                project=project,
                pool=pools[n % 2],
                flavor=flavor,
                guarantee=60 if flavor == flavors[0] else 40,
                preemption_class=klass,
            )
        project_ids.append(project.pk)
        tier_ids.append(tiers[n % 4].pk)
        pool_ids.append(pools[n % 2].pk)
    return {
        "projects": project_ids,
        "tiers": tier_ids,
        "pools": pool_ids,
        "flavors": [flavor.pk for flavor in flavors],
    }


def _array(values: list[int]) -> str:
    return "ARRAY[" + ",".join(str(v) for v in values) + "]"


def generate_jobs(ids: dict[str, list[int]], start: datetime, end: datetime, count: int,
                  tag: str, cut: datetime) -> None:  # fmt: skip
    """``count`` jobs submitted evenly over ``[start, end)``, in submit order (one INSERT)."""
    seconds = (end - start).total_seconds()
    sql = f"""
    INSERT INTO queues_workloadjob (source, job_id, key, name, user_name, queue, qos, account, gpus,
        constraints, state, exit_code, reason, message, category, preemptions,
        gpu_seconds_lost, requeues, last_event_at, project_id, tier_id,
        flavor_id, submitted_at, started_at, ended_at)
    SELECT 'bench', '{tag}-' || g, '{tag}-' || g, '', '', '', '', '', gpus, '',
        CASE WHEN started > %(cut)s THEN 'pending' WHEN ended > %(cut)s THEN 'running'
             WHEN r3 < 0.02 THEN 'failed' ELSE 'completed' END,
        '', '', '', CASE WHEN r2 < 0.2 THEN 'quota' ELSE 'resource' END,
        CASE WHEN r3 BETWEEN 0.02 AND 0.03 THEN 1 ELSE 0 END, 0,
        CASE WHEN r3 BETWEEN 0.02 AND 0.03 THEN 1 ELSE 0 END,
        LEAST(CASE WHEN ended <= %(cut)s THEN ended WHEN started <= %(cut)s THEN started
                   ELSE submitted END, %(cut)s),
        p, t, f, submitted,
        CASE WHEN started > %(cut)s THEN NULL ELSE started END,
        CASE WHEN ended > %(cut)s THEN NULL ELSE ended END
    FROM (
        SELECT g, gpus, r2, r3, p, t, f, submitted, started,
               started + make_interval(secs => -ln(1 - random()) * 7200) AS ended
        FROM (
            SELECT g, (ARRAY[1,1,2,4,8])[1 + (g * 7) %% 5] AS gpus, random() AS r2,
                   random() AS r3,
                   ({_array(ids["projects"])})[1 + (g * 31) %% {PROJECTS}] AS p,
                   ({_array(ids["tiers"])})[1 + (g * 31) %% {PROJECTS}] AS t,
                   ({_array(ids["flavors"])})[1 + (g / 3) %% 2] AS f,
                   submitted,
                   submitted + make_interval(secs => -ln(1 - random())
                       * (ARRAY[3600, 1800, 900, 300])[1 + ((g * 31) %% {PROJECTS}) %% 4])
                       AS started
            FROM (SELECT g, %(start)s::timestamptz
                         + make_interval(secs => (g - 1) * {seconds / count}) AS submitted
                  FROM generate_series(1, {count}) AS g) AS s
        ) AS a
    ) AS b
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, {"start": start, "cut": cut})


def generate_events(after: int, full: bool) -> None:
    """Events of the jobs with ids above ``after``: every change (``full``) or the rare ones."""
    common = "(job_id, source, event_id, time, kind, state, reason, message, category, gpus)"
    with connection.cursor() as cursor:
        if full:
            cursor.execute(
                f"INSERT INTO queues_workloadevent {common} "
                f"SELECT id, 'bench', job_id || '-s', submitted_at, 'submitted', 'pending', '', "
                f"'', category, gpus FROM queues_workloadjob WHERE id > {after}"
            )
            cursor.execute(
                f"INSERT INTO queues_workloadevent {common} "
                f"SELECT id, 'bench', job_id || '-r', started_at, 'started', 'running', '', '', "
                f"'', gpus FROM queues_workloadjob WHERE id > {after} "
                f"AND started_at IS NOT NULL"
            )
            cursor.execute(
                f"INSERT INTO queues_workloadevent {common} "
                f"SELECT id, 'bench', job_id || '-e', ended_at, 'ended', state, '', '', '', gpus "
                f"FROM queues_workloadjob WHERE id > {after} AND ended_at IS NOT NULL "
                f"AND state <> 'failed'"
            )
        cursor.execute(
            f"INSERT INTO queues_workloadevent {common} "
            f"SELECT id, 'bench', job_id || '-f', ended_at, 'ended', 'failed', '', '', '', gpus "
            f"FROM queues_workloadjob WHERE id > {after} AND state = 'failed'"
        )
        # A preempted job: its first run started 1 h before the recorded start (which is the
        # restart), was preempted 30 min later and requeued at once (30 min to restart).
        moves = [
            ("-p0", "started", "running", "started_at - interval '1 hour'"),
            ("-p1", "preempted", "preempted", "started_at - interval '30 minutes'"),
            ("-p2", "requeued", "pending", "started_at - interval '30 minutes'"),
        ]
        if not full:
            moves.append(("-p3", "started", "running", "started_at"))
        for suffix, kind, state, at in moves:
            cursor.execute(
                f"INSERT INTO queues_workloadevent {common} "
                f"SELECT id, 'bench', job_id || '{suffix}', {at}, '{kind}', '{state}', '', '', "
                f"'', gpus FROM queues_workloadjob WHERE id > {after} "
                f"AND preemptions > 0 AND started_at IS NOT NULL"
            )


def generate_hours(after: int, cut: datetime) -> None:
    """The hourly rollup of the jobs with ids above ``after``, set-based (the rollup's
    definition)."""
    sql = f"""
    WITH qp AS (SELECT project_id, flavor_id, MIN(pool_id) AS pool_id FROM governance_quota
                GROUP BY project_id, flavor_id),
    j AS (SELECT j.id, j.flavor_id, j.project_id, j.tier_id, j.gpus, j.category,
                 j.submitted_at, j.started_at, j.ended_at,
                 COALESCE(j.pool_id, qp.pool_id) AS pool_id FROM queues_workloadjob j JOIN qp
          ON qp.project_id = j.project_id AND qp.flavor_id = j.flavor_id
          WHERE j.id > {after}),
    parts AS (
        SELECT h AS hour, pool_id, flavor_id, project_id, tier_id,
               gpus * EXTRACT(EPOCH FROM LEAST(COALESCE(ended_at, %(cut)s), h + interval '1 hour')
                                        - GREATEST(started_at, h)) AS gs, 0 AS ws, 0 AS rs
        FROM j, generate_series(date_trunc('hour', started_at),
                                COALESCE(ended_at, %(cut)s), interval '1 hour') AS h
        WHERE started_at IS NOT NULL AND h < COALESCE(ended_at, %(cut)s)
        UNION ALL
        SELECT h, pool_id, flavor_id, project_id, tier_id, 0, w * quota_, w * (1 - quota_)
        FROM (SELECT h, pool_id, flavor_id, project_id, tier_id,
                     CASE WHEN category = 'quota' THEN 1 ELSE 0 END AS quota_,
                     EXTRACT(EPOCH FROM LEAST(COALESCE(started_at, ended_at, %(cut)s),
                                              h + interval '1 hour') - GREATEST(submitted_at, h))
                         AS w
              FROM j, generate_series(date_trunc('hour', submitted_at),
                                      COALESCE(started_at, ended_at, %(cut)s),
                                      interval '1 hour') AS h
              WHERE category IN ('quota', 'resource')
                    AND h < COALESCE(started_at, ended_at, %(cut)s)) AS waits_
    )
    INSERT INTO queues_workloadhour (hour, pool_id, flavor_id, project_id, tier_id, gpu_seconds,
                                     quota_wait_seconds, resource_wait_seconds)
    SELECT hour, pool_id, flavor_id, project_id, tier_id, ROUND(SUM(gs))::bigint,
           ROUND(SUM(ws))::bigint, ROUND(SUM(rs))::bigint
    FROM parts GROUP BY hour, pool_id, flavor_id, project_id, tier_id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, {"cut": cut})


def generate_waits(after: int) -> None:
    """The first waits (``queues.WorkloadWait``) of the jobs with ids above ``after``,
    set-based (the rollup's definition, ``queues.services.workload.rollup.job_wait``)."""
    sql = f"""
    WITH qp AS (SELECT project_id, flavor_id, MIN(pool_id) AS pool_id FROM governance_quota
                GROUP BY project_id, flavor_id),
    j AS (SELECT j.id, j.submitted_at, j.project_id, j.tier_id, j.flavor_id, j.category,
                 COALESCE(CASE WHEN j.preemptions > 0 OR j.requeues > 0 THEN COALESCE(
                     (SELECT MIN(e.time) FROM queues_workloadevent e
                      WHERE e.job_id = j.id AND e.kind = 'started'), j.started_at)
                     ELSE j.started_at END, j.ended_at) AS wait_end,
                 j.started_at IS NOT NULL AS started
          FROM queues_workloadjob j WHERE j.id > {after} AND j.submitted_at IS NOT NULL)
    INSERT INTO queues_workloadwait (job_id, submitted_at, day, project_id, tier_id, flavor_id,
                                     pool_id, category, wait_end, started)
    SELECT j.id, j.submitted_at, CAST(j.submitted_at AT TIME ZONE 'UTC' AS date), j.project_id,
           j.tier_id, j.flavor_id, qp.pool_id, j.category, j.wait_end, j.started
    FROM j LEFT JOIN qp ON qp.project_id = j.project_id AND qp.flavor_id = j.flavor_id
    ORDER BY j.id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql)


def analyze() -> None:
    with connection.cursor() as cursor:
        tables = ("queues_workloadjob", "queues_workloadevent", "queues_workloadhour",
                  "queues_workloadwait")  # fmt: skip
        for table in tables:
            cursor.execute(f"VACUUM ANALYZE {table}")


def max_id() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COALESCE(MAX(id), 0) FROM queues_workloadjob")
        return int(cursor.fetchone()[0])


def count(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {table}")
        return int(cursor.fetchone()[0])


def _database_cpu(*, exited: bool = True) -> float | None:
    """CPU seconds the database has used so far for this process's reviews (when it runs on
    this machine): this connection's backend, plus (``exited``) the backends that have exited
    (the review opens one per query it runs at once, see ``ARBITER_REVIEW_CONNECTIONS``), which
    the postmaster counts as its children's time. On a shared machine, a figure that the
    others' load does not inflate as much as the wall clock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        mine = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        postmaster = Path(f"/proc/{mine[1]}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = int(mine[11]) + int(mine[12])
    if exited:
        ticks += int(postmaster[13]) + int(postmaster[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def timed(start: datetime, end: datetime, runs: int = 3, by_project: bool = False) -> dict:
    """The median of ``runs`` reviews of [start, end) after a warm-up: ``review_metrics``, or
    (``by_project``) the build's one call for the site and every project's view."""

    def one() -> dict:
        if by_project:
            metrics, views = review_metrics_by_project(start=start, end=end)
            return {**metrics, "views": len(views)}
        return review_metrics(start=start, end=end)

    one()  # warm-up
    times, cpu = [], []
    for _ in range(runs):
        cpu_before = _database_cpu()
        began = time.perf_counter()
        review = one()
        times.append(time.perf_counter() - began)
        cpu_after = _database_cpu()
        if cpu_before is not None and cpu_after is not None:
            cpu.append(cpu_after - cpu_before)
    row = {
        "seconds_median": round(statistics.median(times), 3),
        "seconds_min": round(min(times), 3),
        "database_cpu_seconds_median": round(statistics.median(cpu), 3) if cpu else None,
        "jobs_in_window": review["waits"]["overall"]["jobs"],
        "overall_p90": review["waits"]["overall"]["p90"],
        # The started jobs' own (issue 38): computed in the same ordered pass.
        "overall_started_only_p90": review["waits"]["overall"]["started_only"]["p90"],
        "started_jobs_in_window": review["waits"]["overall"]["started_only"]["jobs"],
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    if by_project:
        row["project_views"] = review["views"]
    return row


def parts(start: datetime, end: datetime) -> dict[str, dict[str, float | None]]:
    """Each query of the build's review (``review_metrics_by_project``) run alone, one after
    another on this connection, with the review's settings: its wall clock and the database's
    CPU seconds (the best of 2 runs). Their sum is the work the build spreads over its
    connections (``ARBITER_REVIEW_CONNECTIONS``): what a faster build must take away."""
    out: dict[str, dict[str, float | None]] = {}
    with transaction.atomic():
        review_settings()
        scope = Scope(start=start, end=end, pool=None, project=None)
        for name, task in review_queries(scope, tables(), Names.load(), per_project=True):
            best: tuple[float, float | None] | None = None
            for _ in range(2):
                cpu_before = _database_cpu(exited=False)
                began = time.perf_counter()
                task()
                wall = time.perf_counter() - began
                cpu_after = _database_cpu(exited=False)
                cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
                if best is None or wall < best[0]:
                    best = (wall, cpu)
            assert best is not None
            out[name] = {
                "seconds": round(best[0], 3),
                "database_cpu_seconds": None if best[1] is None else round(best[1], 2),
            }
    return out


# A fixed piece of work of the kind the review does (sort 1 M numbers, then aggregate them):
# its time, next to each figure, tells a slow phase of a shared machine from a slower review.
REFERENCE_SQL = (
    "SELECT count(*), sum(x) FROM (SELECT (g::bigint * 7919) % 1000003 AS x "
    "FROM generate_series(1, 1000000) AS g ORDER BY 1) AS sorted"
)


def reference() -> float:
    """The median wall-clock seconds of ``REFERENCE_SQL`` over 3 runs."""
    times = []
    with connection.cursor() as cursor:
        cursor.execute("SET work_mem = '256MB'")
        for _ in range(3):
            began = time.perf_counter()
            cursor.execute(REFERENCE_SQL)
            cursor.fetchall()
            times.append(time.perf_counter() - began)
        cursor.execute("RESET work_mem")
    return round(statistics.median(times), 3)


def approver_summary() -> dict[str, object]:
    """The approver's workload summary (``project_workload_summary``) of the busiest project
    (a hundredth of the month's jobs) for the 30 days to the month's end, from the rollup
    (its state set as a run at the month's end leaves it), beside the same figures from the
    raw jobs (``recent_waits`` and ``usage_over``, the former way): the median of 3 runs
    after a warm-up, with the queries of the summary."""
    from django.test.utils import CaptureQueriesContext

    from governance.models import Project
    from queues.models import RollupState
    from queues.models.rollup import ROLLUP_NAME
    from queues.selectors import project_workload_summary
    from queues.selectors.evidence import usage_from_rollup, waits_from_rollup
    from queues.selectors.workload import recent_waits, usage_over

    RollupState.objects.update_or_create(
        name=ROLLUP_NAME, defaults={"watermark": MONTH_END, "last_job_id": max_id()}
    )
    project = Project.objects.get(slug="p0")
    at = MONTH_END  # the rollup's watermark: no job is submitted after it
    since = at.replace(minute=0, second=0, microsecond=0) - timedelta(days=30)

    def new() -> dict[str, Any]:
        return project_workload_summary(project=project, at=at)

    def new_parts() -> object:  # the two parts the former read timed below did
        return (
            waits_from_rollup(project=project, since=since, now=at),
            usage_from_rollup(project=project, since=since, until=at),
        )

    def former() -> tuple[dict[int, dict[str, dict[str, int]]], dict[str, float]]:
        return (
            recent_waits(project_ids=[project.pk], since=since, now=at),
            usage_over(project=project, since=since, until=at),
        )

    row: dict[str, object] = {"jobs_of_the_project": 0}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM queues_workloadjob WHERE project_id = %s AND submitted_at >= %s",
            [project.pk, since],
        )
        row["jobs_of_the_project"] = cursor.fetchone()[0]
    runs: tuple[tuple[str, Callable[[], object]], ...] = (
        ("whole_summary_from_rollup", new),
        ("waits_and_usage_from_rollup", new_parts),
        ("waits_and_usage_from_raw_jobs_former", former),
    )
    for name, fn in runs:
        fn()
        times = []
        for _ in range(3):
            began = time.perf_counter()
            fn()
            times.append(time.perf_counter() - began)
        row[f"{name}_ms_median"] = round(1000 * statistics.median(times), 1)
    with CaptureQueriesContext(connection) as queries:
        summary = new()
    row["queries"] = len(queries)
    raw_waits, raw_usage = former()
    row["same_usage"] = summary["usage"] == raw_usage
    row["same_waits"] = {
        w["category"]: {k: v for k, v in w.items() if k not in ("category", "label")}
        for w in summary["waits"]
    } == dict(raw_waits.get(project.pk, {}))
    return row


def checkpoint(label: str) -> dict[str, object]:
    row = {
        "stored": label,
        "reference_seconds": reference(),
        "jobs": count("queues_workloadjob"),
        "events": count("queues_workloadevent"),
        "hour_rows": count("queues_workloadhour"),
        "month": timed(MONTH, MONTH_END),
        "month_with_project_views": timed(MONTH, MONTH_END, by_project=True),
        "week": timed(MONTH + timedelta(days=7), MONTH + timedelta(days=14)),
        "build_parts_alone": parts(MONTH, MONTH_END),
        "approver_summary": approver_summary(),
        "reference_seconds_after": reference(),
    }
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--month-jobs", type=int, default=1_000_000)
    parser.add_argument("--history-months", type=int, default=9, choices=range(10))
    parser.add_argument("--keep", action="store_true", help="Keep the test database.")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="Time the database DATABASE_URL names, kept by an earlier --keep run (its "
        "<DB>_review name), without generating anything.",
    )
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("bench/review.py needs PostgreSQL (DATABASE_URL).")
    results: dict[str, Any]
    if args.reuse:
        results = {"database": connection.vendor, "reused": True, "runs": []}
        results["runs"].append(checkpoint("as kept"))
        write(results)
        return
    # Not the test suite's test_<DB>: a test run would drop a kept bench database.
    name = f"{settings.DATABASES['default']['NAME']}_review"
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = name
    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    results = {"database": connection.vendor, "month_jobs": args.month_jobs, "runs": []}
    try:
        ids = build()
        began = time.perf_counter()
        generate_jobs(ids, MONTH, MONTH_END, args.month_jobs, "m0", MONTH_END)
        generate_events(0, full=True)
        generate_hours(0, MONTH_END)
        generate_waits(0)
        analyze()
        results["generate_month_seconds"] = round(time.perf_counter() - began, 1)
        results["runs"].append(checkpoint("month only"))
        if args.history_months:
            began = time.perf_counter()
            after = max_id()
            start = datetime(2026, 10 - args.history_months, 1, tzinfo=UTC)
            generate_jobs(ids, start, MONTH, args.month_jobs * args.history_months, "h", MONTH_END)
            print("history jobs generated", flush=True)
            generate_events(after, full=False)
            generate_hours(after, MONTH_END)
            generate_waits(after)
            analyze()
            results["generate_history_seconds"] = round(time.perf_counter() - began, 1)
            results["runs"].append(checkpoint(f"month + {args.history_months} months of history"))
    finally:
        if not args.keep:
            connection.creation.destroy_test_db(test_db, verbosity=0)
    write(results)


def write(results: dict) -> None:
    out = ROOT / "bench" / "results" / f"review-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
