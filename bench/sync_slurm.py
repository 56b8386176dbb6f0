"""Benchmark: plan and apply a first Slurm sync of 500 projects × 2 flavors and 6 tiers.

Run on demand against the lab Slurm (not part of the test suite), from the repository root:

    sudo deploy/slurm/up.sh
    DJANGO_DEBUG=1 ARBITER_DATA_DIR=var/bench .venv/bin/python bench/sync_slurm.py [--projects N]

``--no-slurm`` times only the in-process part (rules → desired state, and its plan against an
empty cluster), for 5,000 or 10,000 projects. ``--code DIR`` imports Arbiter from another
checkout (e.g. a ``git worktree`` of the commit before a change), so that both versions run
the same benchmark, interleaved, on the same machine.

It builds the rules in a throwaway test database through the governance services, then
times, with the number of ``sacctmgr`` calls: the plan of the first sync (rules → desired
state, live read, diff), its apply, the read-back verify, a re-sync with no change (which must
write nothing) and the clean-up (every Arbiter object deleted). It prints the figures and
writes them to ``bench/results/sync_slurm-<timestamp>.json``. Hand-made Slurm objects are left
alone; the Arbiter-managed ones the benchmark created are deleted at the end.
"""

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
CODE = ROOT
if "--code" in sys.argv:
    CODE = Path(sys.argv[sys.argv.index("--code") + 1]).resolve()
sys.path.insert(0, str(CODE))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
os.environ.setdefault("DJANGO_DEBUG", "1")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.fixtures import author, tier_review  # noqa: E402
from governance import services as rules  # noqa: E402
from governance.models import PriorityTier, ProjectRole, SiteRole, User  # noqa: E402
from queues import services  # noqa: E402
from queues.models import Cluster  # noqa: E402
from queues.schedulers.backends import Change, LiveState, State  # noqa: E402
from queues.services.slurm import SlurmBackend, SlurmCommands  # noqa: E402

REASON = "Benchmark"


def slurm_conf() -> str:
    if os.environ.get("SLURM_CONF"):
        return os.environ["SLURM_CONF"]
    env = ROOT / "var" / "slurm" / "env"
    if env.exists():
        for line in env.read_text().splitlines():
            if line.startswith("SLURM_CONF="):
                return line.split("=", 1)[1].strip()
    sys.exit("No SLURM_CONF: start the lab with deploy/slurm/up.sh first.")


def build_rules(projects: int) -> tuple[User, Cluster]:
    ops = User.objects.create_user(username="bench-ops", site_role=SiteRole.OPS)
    kw = author(ops, REASON)
    a100 = rules.flavor_create(
        **kw, slug="a100", name="A100", gpu_model="A100", memory_gb=80, gres_type="a100"
    )
    h100 = rules.flavor_create(
        **kw, slug="h100", name="H100", gpu_model="H100", memory_gb=80, gres_type="h100"
    )
    pool = rules.pool_create(**kw, slug="bench", name="Bench")
    rules.pool_capacity_set(**kw, pool=pool, flavor=a100, gpus=4 * projects)
    rules.pool_capacity_set(**kw, pool=pool, flavor=h100, gpus=4 * projects)
    common = tier_review(ops)
    tiers: list[PriorityTier] = []
    for i, slug in enumerate(["scavenger", "exploratory", "regular", "key", "urgent", "prod"]):
        tiers.append(
            rules.tier_create(
                **kw,
                **common,
                may_preempt=i == 5,
                preemptible_tiers=tiers[:3] if i == 5 else (),
                slug=f"bench-{slug}",
                name=slug.title(),
                score=10 + 15 * i,
                scheduler_value=100 * (i + 1),
                is_default=slug == "regular",
                max_gpus_per_job=8 * (i + 1),
            )
        )
    allowed = rules.preemption_class_create(
        **kw, slug="allowed", name="Allowed", kind="allowed", business_impact="Restartable."
    )
    forbidden = rules.preemption_class_create(
        **kw, slug="forbidden", name="Forbidden", kind="forbidden", business_impact="Serving."
    )
    for i in range(projects):
        project = rules.project_create(
            **kw, slug=f"p{i:04d}", name=f"Project {i}", tier=tiers[i % len(tiers)]
        )
        member = User.objects.create_user(username=f"u{i:04d}")
        rules.membership_set(**kw, project=project, member=member, role=ProjectRole.LEAD)
        for flavor in (a100, h100):
            rules.quota_create(
                **kw,
                project=project,
                pool=pool,
                flavor=flavor,
                guarantee=1 + i % 3,
                borrow_limit=i % 5,
                fair_share_weight=1 + i % 4,
                preemption_class=forbidden if i % 10 == 0 else allowed,
            )
    cluster = services.cluster_create(
        **kw, name="bench", slurm_cluster="arbiter", slurm_conf=slurm_conf(), pools=[pool]
    )
    return ops, cluster


T = TypeVar("T")
Figures = dict[str, dict[str, Any]]


def timed(step: str, figures: Figures, commands: SlurmCommands, fn: Callable[[], T]) -> T:
    calls, writes = commands.calls, commands.writes
    start = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - start
    figures[step] = {
        "seconds": round(seconds, 3),
        "slurm_commands": commands.calls - calls,
        "slurm_writes": commands.writes - writes,
        "seconds_per_command": round(seconds / (commands.calls - calls), 3)
        if commands.calls > calls
        else None,
    }
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", type=int, default=500)
    parser.add_argument("--no-slurm", action="store_true", help="desired state and plan only")
    parser.add_argument("--code", default=str(ROOT), help="the checkout whose code is timed")
    parser.add_argument(
        "--reuse-db",
        action="store_true",
        help="use the configured database (DATABASE_URL, migrated) and build the rules there "
        "only if it has none: both versions then time the same rules (--no-slurm only)",
    )
    args = parser.parse_args()

    setup_test_environment()
    reuse = args.reuse_db and args.no_slurm
    test_db = "" if reuse else connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        start = time.perf_counter()
        from queues.models import Cluster

        existing = Cluster.objects.filter(name="bench").first() if reuse else None
        cluster = existing or build_rules(args.projects)[1]
        built = 0.0 if existing else time.perf_counter() - start
        commands = SlurmCommands(slurm_conf=cluster.slurm_conf, timeout=600)
        backend = SlurmBackend(cluster_name=cluster.slurm_cluster, commands=commands)
        figures: Figures = {}
        now = timezone.now()

        def plan() -> tuple[State, list[Change]]:
            desired = services.desired_state_for(cluster=cluster, backend=backend, at=now)
            return desired, backend.plan(desired=desired, live=backend.read_live())

        if args.no_slurm:

            def offline() -> tuple[State, list[Change]]:
                desired = services.desired_state_for(cluster=cluster, backend=backend, at=now)
                empty = LiveState(objects={}, managed={})
                return desired, backend.plan(desired=desired, live=empty)

            desired, first = timed("desired_state_and_plan", figures, commands, offline)
            figures["desired_state_and_plan"]["changes"] = len(first)
            return _report(args, built, figures)

        desired, first = timed("first_sync_plan", figures, commands, plan)
        writes = [change for change in first if change.is_write]
        figures["first_sync_plan"]["changes"] = len(writes)
        figures["first_sync_plan"]["objects"] = {k: len(v) for k, v in desired.items()}
        timed(
            "first_sync_apply",
            figures,
            commands,
            lambda: backend.apply(plan=writes, desired=desired, progress=lambda text: None),
        )
        remaining = timed("verify", figures, commands, lambda: backend.verify(desired=desired))
        figures["verify"]["remaining"] = [change.as_dict() for change in remaining[:5]]

        def resync() -> list[Change]:
            desired2, changes = plan()
            changes = [change for change in changes if change.is_write]
            backend.apply(plan=changes, desired=desired2, progress=lambda text: None)
            return changes

        again = timed("no_change_resync", figures, commands, resync)
        figures["no_change_resync"]["changes"] = len(again)
        figures["no_change_resync"]["changed"] = [change.as_dict() for change in again[:5]]

        def cleanup() -> list[Change]:
            live = backend.read_live()
            gone = backend.plan(desired={}, live=live)
            backend.apply(plan=gone, desired={}, progress=lambda text: None)
            return gone

        gone = timed("cleanup_delete_all", figures, commands, cleanup)
        figures["cleanup_delete_all"]["changes"] = len(gone)
    finally:
        if test_db:
            connection.creation.destroy_test_db(test_db, verbosity=0)
    _report(args, built, figures)


def _report(args: argparse.Namespace, built: float, figures: Figures) -> None:
    import queues as loaded

    # The code actually imported (an editable install could shadow --code): its checkout.
    source = Path(loaded.__file__).resolve().parent.parent
    commit = os.popen(f"git -C {source} rev-parse --short HEAD 2>/dev/null").read().strip()
    report = {
        "benchmark": "sync_slurm",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "projects": args.projects,
        "code": commit,
        "code_is_requested": source == CODE,
        "mode": "no_slurm" if args.no_slurm else "slurm",
        "flavors": 2,
        "tiers": 6,
        "build_rules_seconds": round(built, 1),
        "quickack": "quickack" in os.popen("ip route show table local 2>/dev/null").read(),
        "figures": figures,
    }
    print(json.dumps(report, indent=2))
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"sync_slurm-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{commit}-{args.projects}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
