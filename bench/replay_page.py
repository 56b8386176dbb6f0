"""Benchmark: the replay page of the demo's proposed change (target: under a second).

Run on demand (not part of the test suite), from the repository root:

    DATABASE_URL=postgres://USER@HOST:5432/DB DJANGO_DEBUG=1 nice .venv/bin/python \\
        bench/replay_page.py [--days 45] [--rounds 7] [--scheduler demo|none|slurm|kueue]

In a throwaway database (``<DB>_replay_page``) it loads the demo (``demo_seed``), ``--days``
of its workload (``demo_workload_seed``), replays the demo's proposed change (Medical imaging
guaranteed 16 A100s), analyses the database (as autovacuum keeps a live one) and then,
signed in as ops through Django's test client, asks for its replay page
(``/changes/<id>/replay/``) and its API figures ``--rounds`` times after a warm-up: the
median and fastest wall-clock time, this process's CPU time, the SQL queries and their time,
the size of the page, with the load average (the machine may be shared). It prints the
figures and writes them to ``bench/results/replay-page-<timestamp>.json``.

The demo records its jobs on its own clusters (``--scheduler demo``, the default): the
training pool's on a Kueue cluster, the inference pool's on a Slurm cluster without a
``slurm.conf`` (Slurm's defaults), so the change's replay runs each through its scheduler's
model (``queues.replay.by_cluster``). ``--scheduler slurm`` or ``kueue`` moves every job to
one added cluster of that scheduler serving every pool; ``none`` removes the clusters (the
generic engine replays all, as before the demo had clusters). The models that ran and the
replay's time are printed and written too. The demo's change edits a guarantee, which the
Slurm model does not model (on ``slurm`` the engine runs it, and says why):
``--change tier-score`` replays instead a draft change raising the highest tier's score by
one, which no model falls back on.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
os.environ.setdefault("DJANGO_DEBUG", "1")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402

from governance import services as rules  # noqa: E402
from governance.models import ChangeStatus, Pool, PriorityTier, RuleChange, User  # noqa: E402
from governance.services.changes.spec import EditSpec  # noqa: E402
from queues import services as queue_services  # noqa: E402
from queues.models import Cluster, ReplayStatus, WorkloadJob  # noqa: E402
from queues.services import change_replay_start  # noqa: E402
from queues.services.replay import change_replay_run  # noqa: E402
from queues.services.workload.demo import demo_workload_seed  # noqa: E402


def use_clusters(scheduler: str) -> None:
    """The demo's clusters (``demo``), none, or one of ``scheduler`` serving every pool and
    running every job."""
    if scheduler == "demo":
        return
    Cluster.objects.all().delete()  # the demo's; its jobs keep no cluster
    if scheduler != "none":
        WorkloadJob.objects.update(cluster=add_cluster(scheduler))


def add_cluster(scheduler: str) -> Cluster:
    """A cluster of ``scheduler`` serving every pool of the demo."""
    ops = User.objects.get(username="ops")
    kw: dict[str, Any] = {"user": ops, "reason": "Benchmark", "pools": list(Pool.objects.all())}
    if scheduler == "slurm":
        return queue_services.cluster_create(**kw, name="bench-slurm", slurm_cluster="bench")
    folder = tempfile.mkdtemp(prefix="arbiter-bench-")
    Path(folder, "token").write_text("t")
    settings.ARBITER_KUBE_CREDENTIALS_DIR = folder
    return queue_services.cluster_create(
        **kw,
        name="bench-kueue",
        backend="kueue",
        kube_api_server="https://127.0.0.1:9",
        kube_credentials_file="token",
    )


def tier_score_change() -> RuleChange:
    """A draft change raising the highest tier's score by one."""
    tier = PriorityTier.objects.order_by("-score").first()
    assert tier is not None
    return rules.rule_change_create(
        user=User.objects.get(username="ops"),
        reason="Benchmark",
        edits=[EditSpec(target=tier, field="score", value=tier.score + 1)],
        title="Benchmark: highest tier first",
        submit=False,
    )


def prepare(days: int, scheduler: str, which: str, results: dict[str, Any]) -> RuleChange:
    rules.demo_seed(password="pw")
    demo_workload_seed(days=days)
    use_clusters(scheduler)
    if which == "tier-score":
        change = tier_score_change()
    else:
        change = RuleChange.objects.get(status=ChangeStatus.PROPOSED)
    run, _queued = change_replay_start(change=change, user=User.objects.get(username="ops"))
    began = time.perf_counter()
    done = change_replay_run(replay_id=run.pk)
    results["replay_seconds"] = round(time.perf_counter() - began, 1)
    print(f"replayed in {results['replay_seconds']:.1f} s", flush=True)
    if done is None or done.status != ReplayStatus.DONE:
        sys.exit(f"The replay did not finish: {done and done.error}")
    results["models"] = (done.result or {}).get("models", [])
    print("models", json.dumps(results["models"]), flush=True)
    if connection.vendor == "postgresql":
        # As autovacuum keeps a live database: the replay's fresh rows analysed (without
        # statistics the planner may not hash the review's groups and falls back to a slower
        # plan, which the first reads after a replay would otherwise measure).
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return change


def measure(client: Client, url: str, rounds: int) -> dict[str, Any]:
    client.get(url)  # warm-up: the session, the caches
    walls, cpus = [], []
    for _ in range(rounds):
        cpu = time.process_time()
        began = time.perf_counter()
        response = client.get(url)
        walls.append(time.perf_counter() - began)
        cpus.append(time.process_time() - cpu)
        assert response.status_code == 200, response.status_code
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    query_seconds = sum(float(q["time"]) for q in queries.captured_queries)
    return {
        "seconds_median": round(statistics.median(walls), 3),
        "seconds_min": round(min(walls), 3),
        "process_cpu_seconds_median": round(statistics.median(cpus), 3),
        "queries": len(queries),
        "query_seconds": round(query_seconds, 3),
        "bytes": len(response.content),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=45)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--scheduler", choices=("demo", "none", "slurm", "kueue"), default="demo")
    parser.add_argument("--change", choices=("demo", "tier-score"), default="demo")
    args = parser.parse_args()
    name = f"{settings.DATABASES['default']['NAME']}_replay_page"
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = name
    setup_test_environment()
    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    results: dict[str, Any] = {
        "database": connection.vendor,
        "days": args.days,
        "scheduler": args.scheduler,
        "change": args.change,
    }
    try:
        change = prepare(args.days, args.scheduler, args.change, results)
        client = Client()
        client.force_login(User.objects.get(username="ops"))
        results["page"] = measure(client, f"/changes/{change.pk}/replay/", args.rounds)
        print("page", json.dumps(results["page"]), flush=True)
        results["api"] = measure(
            client, f"/api/v1/changes/{change.pk}/replay/figures/", args.rounds
        )
        print("api", json.dumps(results["api"]), flush=True)
    finally:
        connection.creation.destroy_test_db(test_db, verbosity=0)
    out = ROOT / "bench" / "results" / f"replay-page-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
