"""Benchmark: file and submit one request in an organisation of N projects.

Run on demand (not part of the test suite), from the repository root:

    DJANGO_DEBUG=1 .venv/bin/python bench/request_submit.py [--projects 100 3000] [--runs 5]

Submitting a request checks its terms against the project's effective rules and takes the
evidence snapshot; both read ``effective_rules`` narrowed to the one project, so the cost
should not grow with the number of projects. For each size it builds, in a throwaway test
database, the tiers, a pool, two flavors and the approval policies through the services,
then the projects, their leads and their quotas through a documented bulk path
(``bulk_create``: these rows are only the background of the measurement, so they carry no
history), and times ``request_create(submit=True)`` for a quota exception of one project,
``--runs`` times (each for another project). It prints the median seconds and the query count
and writes them to ``bench/results/request_submit-<timestamp>.json``.
"""

import argparse
import inspect
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
os.environ.setdefault("DJANGO_DEBUG", "1")

import django  # noqa: E402

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from django.utils import timezone  # noqa: E402

from approvals import services as approvals  # noqa: E402
from approvals.models import RequestKind, UpgradeRequest  # noqa: E402
from bench.fixtures import author, tier_review  # noqa: E402
from governance import services as rules  # noqa: E402
from governance.models import (  # noqa: E402
    Membership,
    Project,
    ProjectRole,
    Quota,
    SiteRole,
    User,
)

REASON = "Benchmark"


def build(projects: int) -> dict[str, Any]:
    ops = User.objects.create_user(username="bench-ops", site_role=SiteRole.OPS)
    kw = author(ops, REASON)
    a100 = rules.flavor_create(
        **kw, slug="a100", name="A100", gpu_model="A100", memory_gb=80, gres_type="a100"
    )
    h100 = rules.flavor_create(
        **kw, slug="h100", name="H100", gpu_model="H100", memory_gb=80, gres_type="h100"
    )
    pool = rules.pool_create(**kw, slug="bench", name="Bench")
    rules.pool_capacity_set(**kw, pool=pool, flavor=a100, gpus=8 * projects)
    rules.pool_capacity_set(**kw, pool=pool, flavor=h100, gpus=8 * projects)
    common = tier_review(ops)
    tiers = [
        rules.tier_create(
            **kw,
            **common,
            slug=f"bench-{slug}",
            name=slug.title(),
            score=10 + 15 * i,
            scheduler_value=100 * (i + 1),
            is_default=slug == "regular",
            max_gpus_per_job=8 * (i + 1),
        )
        for i, slug in enumerate(["exploratory", "regular", "key"])
    ]
    allowed = rules.preemption_class_create(
        **kw, slug="allowed", name="Allowed", kind="allowed", business_impact="Restartable."
    )
    for kind in RequestKind.values:
        approvals.policy_create(**kw, kind=kind, max_duration_days=30, monthly_flag_threshold=9)
    # The background: bulk rows (no history), as the docstring says.
    Project.objects.bulk_create(
        Project(slug=f"p{i:05d}", name=f"Project {i}", tier=tiers[i % 2]) for i in range(projects)
    )
    rows = {project.slug: project for project in Project.objects.all()}
    User.objects.bulk_create(User(username=f"u{i:05d}") for i in range(projects))
    users = {user.username: user for user in User.objects.filter(username__startswith="u")}
    Membership.objects.bulk_create(
        Membership(project=rows[f"p{i:05d}"], user=users[f"u{i:05d}"], role=ProjectRole.LEAD)
        for i in range(projects)
    )
    Quota.objects.bulk_create(
        Quota(
            project=rows[f"p{i:05d}"],
            pool=pool,
            flavor=flavor,
            guarantee=1,
            borrow_limit=2,
            fair_share_weight=1,
            preemption_class=allowed,
        )
        for i in range(projects)
        for flavor in (a100, h100)
    )
    return {"pool": pool, "flavor": a100, "projects": rows, "users": users}


def submit(world: dict[str, Any], i: int) -> None:
    now = timezone.now()
    values = {
        "kind": RequestKind.QUOTA_EXCEPTION,
        "starts_at": now + timedelta(hours=1),
        "ends_at": now + timedelta(days=2),
        "pool": world["pool"],
        "flavor": world["flavor"],
        "extra_gpus": 4,
    }
    common = {
        "user": world["users"][f"u{i:05d}"],
        "project": world["projects"][f"p{i:05d}"],
        "justification": "Benchmark",
        "business_impact": "None",
        "submit": True,
        "now": now,
    }
    if "terms" in inspect.signature(approvals.request_create).parameters:
        from governance.models import Terms

        approvals.request_create(**common, terms=Terms.from_data(values))
    else:  # the signature before the grant terms had one home
        approvals.request_create(**common, **values)


def measure(projects: int, runs: int) -> dict[str, Any]:
    with transaction.atomic():
        world = build(projects)
        seconds, queries = [], []
        for run in range(runs):
            with CaptureQueriesContext(connection) as captured:
                start = time.perf_counter()
                submit(world, run * (projects // runs))
                seconds.append(time.perf_counter() - start)
            queries.append(len(captured.captured_queries))
        assert UpgradeRequest.objects.count() == runs
        transaction.set_rollback(True)
    return {
        "projects": projects,
        "median_seconds": round(statistics.median(seconds), 4),
        "queries": queries,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", type=int, nargs="+", default=[100, 3000])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    setup_test_environment()
    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        figures = [measure(size, args.runs) for size in args.projects]
    finally:
        connection.creation.destroy_test_db(test_db, verbosity=0)
    report = {
        "benchmark": "request_submit",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "database": connection.vendor,
        "figures": figures,
    }
    for row in figures:
        print(
            f"{row['projects']:>6} projects: submit one request in "
            f"{row['median_seconds'] * 1000:.1f} ms (median), queries {row['queries']}"
        )
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"request_submit-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
