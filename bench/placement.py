"""Benchmark: ``GET /api/v1/placement/`` under load, against the framework's own ceiling.

Run on demand (not part of the test suite), from the repository root, on PostgreSQL:

    DATABASE_URL=postgres://USER@HOST:5432/DB .venv/bin/python bench/placement.py
    [--projects 1000] [--seconds 15] [--rounds 4] [--workers 5] [--users 16]
    [--threads N] [--generator wrk|locust]

It builds an organisation of ``--projects`` projects in a throwaway database (``<DB>_bench``)
with ``bench/pages.py``'s builder (3 members and 2 quotas per project, 4 tiers, 2 pools, 2
flavors), and adds what placement reads: a Slurm cluster serving both pools, a Kueue cluster
serving one, a per-job cap on one tier, active grants (a priority upgrade and a quota
exception for every 20th project) and workload evidence (2 running and 10 finished jobs per
project). It then starts gunicorn on loopback (``bench.settings``: the production settings,
debug off, plus the bench-only ceiling endpoint and no rate limits) and drives ``--users``
concurrent clients (connections, no think time), each request with an API token, with wrk
(``apt-get install wrk``; one thread, ``bench/placement.lua``) or, with ``--generator
locust``, with locust (headless, ``FastHttpUser``). The load generator shares the machine's
CPUs with the server: wrk costs about 0.1 ms of CPU per request, locust about 0.65 ms (a
quarter of what the server spends), so locust's figures are those of a server with less
CPU. Each phase records the generator's CPU per request too.

* ``ceiling``: ``GET /bench/ceiling/``, a DRF APIView with the project's default
  authentication, permission, throttle and renderer classes that returns a constant, routed
  where placement is (the same URL resolution);
* ``placement``: ``GET /api/v1/placement/`` for a random one of 400 queries (random
  projects, each tier, 1-16 GPUs, both flavors: allowed and refused answers).

Phases alternate (ceiling, placement) ``--rounds`` times, after a warm-up of 10 s of both, so that
the load of a shared machine falls on both alike. It prints throughput and p50/p99 per phase
and in total, the ratio of placement to ceiling throughput (target ≥ 70 %) and placement's
p99 (target ≤ 50 ms), and writes them to ``bench/results/placement-<timestamp>.json``.

The caller is a project lead with a personal token (scope ``read``) made by the token
service. Both phases run on the same server (same workers, same settings: rate limits are
off for both, as one load generator's token would exceed them). Since the machine may be
shared, each phase also records the CPU a request costs the server (gunicorn's processes
and the database's backends, not the load generator), which moves far less than wall-clock
figures when other work competes for the CPUs.
"""

import argparse
import csv
import json
import os
import random
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
os.environ.setdefault("DJANGO_DEBUG", "1")

import django  # noqa: E402
import psutil  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.fixtures import author  # noqa: E402
from bench.pages import REASON, Org  # noqa: E402
from governance import services  # noqa: E402
from governance.models import GrantKind, Project, Terms, User  # noqa: E402
from queues import services as queue_services  # noqa: E402
from queues.models import JobState, WorkloadJob  # noqa: E402

BIN = ROOT / ".venv" / "bin"
TARGET_RATIO = 0.70
TARGET_P99_MS = 50.0


def build(projects: int, credentials_dir: str) -> tuple[str, list[str]]:
    """The organisation; returns an API token and the placement queries to ask."""
    org = Org()
    org.grow(projects)
    kw = author(org.ops, REASON)
    key = next(tier for tier in org.tiers if tier.slug == "key")
    services.tier_update(tier=key, **kw, data={"max_gpus_per_job": 8})
    settings.ARBITER_KUBE_CREDENTIALS_DIR = credentials_dir
    queue_services.cluster_create(**kw, name="hpc", slurm_cluster="hpc", pools=org.pools)
    queue_services.cluster_create(
        **kw,
        name="k8s",
        backend="kueue",
        kube_api_server="https://127.0.0.1:9",
        kube_credentials_file="token",
        pools=[org.pools[0]],
    )
    rows = list(Project.objects.order_by("slug"))
    now = timezone.now()
    urgent = next(tier for tier in org.tiers if tier.slug == "urgent")
    for project in rows[::20]:
        starts_at, ends_at = now - timedelta(hours=1), now + timedelta(days=7)
        services.grant_create(
            **kw,
            project=project,
            terms=Terms(
                kind=GrantKind.PRIORITY_UPGRADE, tier=urgent, starts_at=starts_at, ends_at=ends_at
            ),
        )
        services.grant_create(
            **kw,
            project=project,
            terms=Terms(
                kind=GrantKind.QUOTA_EXCEPTION,
                pool=org.pools[0],
                flavor=org.flavors[0],
                extra_gpus=4,
                starts_at=starts_at,
                ends_at=ends_at,
            ),
        )
    jobs = []
    for index, project in enumerate(rows):
        for n in range(12):
            running = n < 2
            started = now - timedelta(hours=n + 1)
            jobs.append(
                WorkloadJob(
                    source="hpc",
                    job_id=f"{index}-{n}",
                    key=f"{index}-{n}",
                    project=project,
                    gpus=1 + n % 4,
                    flavor=org.flavors[n % 2],
                    state=JobState.RUNNING if running else JobState.COMPLETED,
                    submitted_at=started - timedelta(minutes=5),
                    started_at=started,
                    ended_at=None if running else started + timedelta(minutes=30),
                    last_event_at=started,
                )
            )
    WorkloadJob.objects.bulk_create(jobs, batch_size=2000)
    with connection.cursor() as cursor:
        # A database in its steady state, not one just bulk-loaded: otherwise autovacuum
        # visits the new rows during the first round.
        cursor.execute("VACUUM ANALYZE")
    caller = User.objects.get(username="user-0-0")  # a project lead, not ops
    # A personal token with the read scope, through our own token service (shown once).
    token = services.personal_token_create(user=caller, name="bench", scopes=["read"]).key
    rng = random.Random(13)
    tiers = [tier.slug for tier in org.tiers]
    flavors = [flavor.slug for flavor in org.flavors]
    queries = [
        f"/api/v1/placement/?project={rng.choice(rows).slug}&tier={rng.choice(tiers)}"
        f"&gpus={rng.randint(1, 16)}&flavor={rng.choice(flavors)}"
        for _ in range(400)
    ]
    return token, queries


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, token: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def start_server(database: str, workers: int, threads: int) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    url = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "DATABASE_URL": (
            f"postgres://{url['USER']}:{url['PASSWORD']}@{url['HOST']}:{url['PORT']}/{database}"
        ),
        "DATABASE_CONN_MAX_AGE": "600",
        "ARBITER_KUBE_CREDENTIALS_DIR": settings.ARBITER_KUBE_CREDENTIALS_DIR,
    }
    server = subprocess.Popen(
        [
            str(BIN / "gunicorn"),
            "governance.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            *(["--worker-class", "gthread", "--threads", str(threads)] if threads else []),
            "--backlog",
            "256",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    return server, f"http://127.0.0.1:{port}"


def wait_ready(base: str, token: str, server: subprocess.Popen[bytes]) -> None:
    for _ in range(120):
        if server.poll() is not None:
            raise SystemExit("gunicorn exited")
        try:
            if _get(base + "/bench/ceiling/", token)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("gunicorn did not answer")


def server_cpu(server: subprocess.Popen[bytes], database: str) -> dict[str, dict[int, float]]:
    """CPU seconds used so far by each gunicorn process and each PostgreSQL backend of the
    bench database (not the load generator's): on a shared machine, the CPU a request costs
    moves much less than its wall-clock figures."""
    app: dict[int, float] = {}
    master = psutil.Process(server.pid)
    for process in [master, *master.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        app[process.pid] = times.user + times.system
    db: dict[int, float] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [database],
        )
        pids = [row[0] for row in cursor.fetchall()]
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        db[pid] = times.user + times.system
    return {"app": app, "db": db}


def _children_cpu() -> float:
    """CPU seconds of this process's finished children: the load generator's runs (gunicorn
    is still running, so not counted)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def locust(
    base: str, token: str, name: str, paths: list[str], seconds: int, users: int, out: Path
) -> dict[str, float]:
    """One headless locust phase; its aggregated figures."""
    prefix = out / name
    env = {
        **os.environ,
        "BENCH_PATHS": " ".join(paths),
        "BENCH_TOKEN": token,
        "BENCH_NAME": name,
    }
    subprocess.run(
        [
            str(BIN / "locust"),
            "-f",
            str(ROOT / "bench" / "locustfile_placement.py"),
            "--headless",
            "--users",
            str(users),
            "--spawn-rate",
            str(users),
            "--run-time",
            f"{seconds}s",
            "--host",
            base,
            "--csv",
            str(prefix),
            "--only-summary",
            "--loglevel",
            "WARNING",
        ],
        env=env,
        check=False,
        stdout=subprocess.DEVNULL,
    )
    with open(f"{prefix}_stats.csv", newline="") as handle:
        row = next(r for r in csv.DictReader(handle) if r["Name"] == name)
    return {
        "requests": int(row["Request Count"]),
        "failures": int(row["Failure Count"]),
        "rps": round(float(row["Requests/s"]), 1),
        "p50_ms": float(row["50%"]),
        "p99_ms": float(row["99%"]),
        "mean_ms": round(float(row["Average Response Time"]), 2),
    }


def wrk(
    base: str, token: str, name: str, paths: list[str], seconds: int, users: int, out: Path
) -> dict[str, float]:
    """One wrk phase (``--users`` connections on one thread, ``bench/placement.lua``); its
    figures in the same shape as ``locust``'s."""
    paths_file = out / f"{name}.paths"
    paths_file.write_text("\n".join(paths) + "\n")
    env = {**os.environ, "BENCH_PATHS_FILE": str(paths_file), "BENCH_TOKEN": token}
    command = [
        "wrk",
        "--threads",
        "1",
        "--connections",
        str(users),
        "--duration",
        f"{seconds}s",
        "--timeout",
        "10s",
        "--script",
        str(ROOT / "bench" / "placement.lua"),
        base + paths[0],
    ]
    done = subprocess.run(command, env=env, check=False, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"wrk failed ({done.returncode}): {done.stderr.strip() or done.stdout}")
    row = json.loads(lines[-1])
    requests = int(row["requests"])
    return {
        "requests": requests,
        "failures": int(row["errors"]),
        "rps": round(requests / (int(row["duration_us"]) / 1e6), 1),
        "p50_ms": round(int(row["p50_us"]) / 1000, 1),
        "p99_ms": round(int(row["p99_us"]) / 1000, 1),
        "mean_ms": round(float(row["mean_us"]) / 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--projects", type=int, default=1000)
    # Short phases, alternated often: the load of a shared machine falls on both endpoints
    # alike.
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=4)
    # gunicorn's advice for sync workers: 2 × cores + 1.
    parser.add_argument("--workers", type=int, default=2 * (os.cpu_count() or 1) + 1)
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="gthread workers with this many threads each (keep-alive connections); "
        "0: sync workers (one connection per request)",
    )
    parser.add_argument(
        "--generator",
        choices=("wrk", "locust"),
        default="wrk",
        help="the load generator: wrk (C, one thread: little of the server's CPU) or locust "
        "(Python)",
    )
    args = parser.parse_args()
    if args.generator == "wrk" and shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk (or --generator locust)")
    drive = wrk if args.generator == "wrk" else locust
    if connection.vendor != "postgresql":
        raise SystemExit("Run it on PostgreSQL: set DATABASE_URL (see the docstring).")
    name = f"{settings.DATABASES['default']['NAME']}_bench"
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = name
    database = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    server = None
    phases: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as credentials:
            (Path(credentials) / "token").write_text("unused")
            began = time.perf_counter()
            token, queries = build(args.projects, credentials)
            built = time.perf_counter() - began
            print(f"built {args.projects} projects in {built:.1f} s", flush=True)
            connection.close()
            server, base = start_server(database, args.workers, args.threads)
            wait_ready(base, token, server)
            status, body = _get(base + queries[0], token)
            assert status == 200, (status, body[:500])
            sample = json.loads(body)
            with tempfile.TemporaryDirectory() as out_dir:
                out = Path(out_dir)
                targets = {"ceiling": ["/bench/ceiling/"], "placement": queries}
                # Warm-up: every worker compiles the rules and prepares its statements, and
                # has seen most questions once.
                for target, paths in targets.items():
                    drive(base, token, target, paths, 10, args.users, out)
                for round_ in range(1, args.rounds + 1):
                    for target, paths in targets.items():
                        before = server_cpu(server, database)
                        generator_before = _children_cpu()
                        figures = drive(base, token, target, paths, args.seconds, args.users, out)
                        after = server_cpu(server, database)
                        count = max(int(figures["requests"]), 1)
                        figures["generator_cpu_ms"] = round(
                            (_children_cpu() - generator_before) / count * 1000, 3
                        )
                        for part in ("app", "db"):
                            used = _cpu_used(before[part], after[part])
                            figures[f"{part}_cpu_ms"] = round(used / count * 1000, 3)
                        phases.append({"round": round_, "endpoint": target, **figures})
                        print(
                            f"round {round_} {target:10} {figures['rps']:8.1f} req/s  "
                            f"p50 {figures['p50_ms']:5.0f} ms  p99 {figures['p99_ms']:5.0f} ms  "
                            f"CPU/request {figures['app_cpu_ms']:.2f} ms gunicorn + "
                            f"{figures['db_cpu_ms']:.2f} ms PostgreSQL "
                            f"({figures['generator_cpu_ms']:.2f} ms {args.generator})  "
                            f"failures {figures['failures']}",
                            flush=True,
                        )
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
        connection.creation.destroy_test_db(database, verbosity=0)

    summary: dict[str, dict[str, float]] = {}
    for target in ("ceiling", "placement"):
        mine = [p for p in phases if p["endpoint"] == target]
        summary[target] = {
            "rps": round(sum(float(p["rps"]) for p in mine) / len(mine), 1),
            "p50_ms": max(float(p["p50_ms"]) for p in mine),
            "p99_ms": max(float(p["p99_ms"]) for p in mine),
            "failures": sum(int(p["failures"]) for p in mine),
            # CPU per request over all rounds (total CPU / total requests).
            **{
                f"{part}_cpu_ms": round(
                    sum(float(p[f"{part}_cpu_ms"]) * int(p["requests"]) for p in mine)
                    / max(sum(int(p["requests"]) for p in mine), 1),
                    3,
                )
                for part in ("app", "db")
            },
        }
    ratio = summary["placement"]["rps"] / summary["ceiling"]["rps"]
    cpu = {t: s["app_cpu_ms"] + s["db_cpu_ms"] for t, s in summary.items()}
    cpu_ratio = cpu["ceiling"] / cpu["placement"] if cpu["placement"] else 0.0
    ok_ratio = ratio >= TARGET_RATIO
    ok_p99 = summary["placement"]["p99_ms"] <= TARGET_P99_MS
    lines = [
        f"{args.projects} projects, {args.users} clients, gunicorn {args.workers} "
        f"{f'gthread workers × {args.threads} threads' if args.threads else 'sync workers'}, "
        f"{args.rounds} rounds of {args.seconds} s per endpoint, load from {args.generator} "
        f"({os.cpu_count()} CPUs, shared)",
        f"{'endpoint':10} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'CPU ms/req':>11} "
        f"{'(gunicorn + PostgreSQL)':>24}  (p50/p99: worst round)",
        *(
            f"{t:10} {s['rps']:8.1f} {s['p50_ms']:7.0f} {s['p99_ms']:7.0f} "
            f"{s['app_cpu_ms'] + s['db_cpu_ms']:11.2f} "
            f"{s['app_cpu_ms']:>15.2f} + {s['db_cpu_ms']:.2f}"
            for t, s in summary.items()
        ),
        f"CPU per request, ceiling / placement: {cpu_ratio:.0%} (the throughput ratio of a "
        "server that only its CPU limits)",
        f"placement / ceiling throughput: {ratio:.0%} (target ≥ {TARGET_RATIO:.0%}: "
        f"{'met' if ok_ratio else 'NOT met'}); placement p99 "
        f"{summary['placement']['p99_ms']:.0f} ms (target ≤ {TARGET_P99_MS:.0f} ms: "
        f"{'met' if ok_p99 else 'NOT met'})",
    ]
    print("\n".join(lines))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out_file = ROOT / "bench" / "results" / f"placement-{stamp}.json"
    out_file.write_text(
        json.dumps(
            {
                "projects": args.projects,
                "users": args.users,
                "workers": args.workers,
                "threads": args.threads,
                "generator": args.generator,
                "seconds": args.seconds,
                "rounds": args.rounds,
                "cpus": os.cpu_count(),
                "load_average_at_end": os.getloadavg(),
                "build_seconds": round(built, 1),
                "phases": phases,
                "summary": summary,
                "ratio": round(ratio, 3),
                "cpu_ratio": round(cpu_ratio, 3),
                "target": {"ratio": TARGET_RATIO, "p99_ms": TARGET_P99_MS},
                "met": {"ratio": ok_ratio, "p99": ok_p99},
                "sample_answer_allowed": sample.get("allowed"),
                "table": lines,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"written to {out_file.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
