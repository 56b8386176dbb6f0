"""Benchmark: every list page and API list at 100, 1,000 and 10,000 projects.

Run on demand (not part of the test suite), from the repository root, on PostgreSQL:

    DATABASE_URL=postgres://USER@HOST:5432/DB DJANGO_DEBUG=1 nice .venv/bin/python bench/pages.py
    [--sizes 100,1000,10000] [--rounds 7] [--rebuild] [--only NAME]

Each size is built once into a database of its own, ``<DB>_<size>`` (``DB`` from
``DATABASE_URL``), and reused by the next runs (migrated to the current schema first); a
database whose build did not finish, or ``--rebuild``, is built again. Each database is
vacuumed and analysed before measuring, as autovacuum keeps a live one.

The measure is interleaved: for each list page and API list (and the detail pages that embed
a list), signed in as ops, one request at each size in turn, round after round (one warm-up
round, then ``--rounds``), each size on its own open connection; so a busy machine slows
every size alike instead of whichever ran last. Per target and size it reports the median
and the fastest time, the median CPU time of this process (``cpu_ms``), the median
CPU-and-query time (this process's CPU time plus the time of the queries: less sensitive to
other load), the number of SQL queries and the size of the response; and the ratios of the
largest size to the smallest: of the medians, paired (the median of the round-by-round
ratios, requests made moments apart), of the fastest times and of the CPU-and-query times.
It prints a table, flags the misses and writes the figures to
``bench/results/pages-<timestamp>.json`` (``-only.json`` with ``--only``). Target: the
median time, the queries and the size at the largest size within 1.5× of the smallest, and
no page over 150 KB. A median ratio over 1.5× whose paired or CPU-and-query ratio is within
it is marked ``noise`` (the machine's load, not the code): run again, with ``--only`` and
more rounds.

The organisation per project: 3 members (a lead and two members, each a user of their own), 2
quotas (one in each of the 2 pools, one of each of the 2 flavors); plus 4 tiers, 2 preemption
classes, 2 pools with capacity, 2 flavors, and, growing with the projects, rule changes (one per
20 projects) and requests (one per 25 projects, a third of them waiting for a decision).

How the fixture is written. The shared rules (flavors, pools, capacities, tiers, preemption
classes, approval policies) and a first change and request go through the services. The
projects, users, memberships and quotas, and the further changes and requests, are written in
bulk, which the services cannot do at this size (each quota check reads the pool): governed
rows with ``simple_history.utils.bulk_create_with_history``, so every one of them has its
history row with a user (the bench ops user) and a reason ("Benchmark fixture"), as the house
rules require; changes and requests are clones of the ones made by the services (same fields,
another project or quota). Users and rule edits are not governed and are bulk-created plainly.
"""

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
os.environ.setdefault("DJANGO_DEBUG", "1")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.contenttypes.models import ContentType  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections  # noqa: E402
from django.db.backends.base.base import BaseDatabaseWrapper  # noqa: E402
from django.db.models import Model  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from django.urls import reverse  # noqa: E402
from django.utils import timezone  # noqa: E402
from simple_history.utils import bulk_create_with_history  # noqa: E402

from approvals import services as approval_services  # noqa: E402
from approvals.models import RequestKind, RequestStage, UpgradeRequest  # noqa: E402
from bench.fixtures import author, tier_review  # noqa: E402
from bench.targets import MAX_PAGE_BYTES, TARGET_RATIO  # noqa: E402
from governance import services  # noqa: E402
from governance.models import (  # noqa: E402
    Membership,
    Project,
    ProjectRole,
    Quota,
    RuleChange,
    RuleEdit,
    SiteRole,
    Terms,
    User,
)

REASON = "Benchmark fixture"
FINISHED = "bench-fixture-finished"  # a marker user: the build of this database completed


class Org:
    """The organisation, grown in place from one size to the next."""

    def __init__(self) -> None:
        self.projects = 0
        self.ops = User.objects.create_user(username="bench-ops", site_role=SiteRole.OPS)
        self.ops2 = User.objects.create_user(username="bench-ops2", site_role=SiteRole.OPS)
        kw = author(self.ops, REASON)
        self.flavors = [
            services.flavor_create(
                **kw, slug=slug, name=slug.upper(), gpu_model=slug.upper(), memory_gb=80
            )
            for slug in ("a100", "h100")
        ]
        self.pools = [
            services.pool_create(**kw, slug=slug, name=slug.title()) for slug in ("train", "infer")
        ]
        for pool, flavor in zip(self.pools, self.flavors, strict=True):
            services.pool_capacity_set(**kw, pool=pool, flavor=flavor, gpus=1_000_000)
        common = tier_review(self.ops2)
        self.tiers = [
            services.tier_create(
                **kw,
                **common,
                slug=slug,
                name=slug.title(),
                score=score,
                scheduler_value=score * 10,
                is_default=slug == "regular",
            )
            for slug, score in (("scavenger", 10), ("regular", 30), ("key", 60), ("urgent", 80))
        ]
        self.classes = [
            services.preemption_class_create(
                **kw, slug=slug, name=slug.title(), kind=kind, business_impact="Bench"
            )
            for slug, kind in (("cautious", "cautious"), ("allowed", "allowed"))
        ]
        for kind in RequestKind.values:
            approval_services.policy_create(
                **kw, kind=kind, max_duration_days=30, monthly_flag_threshold=5
            )
        self.grow(1)
        project = Project.objects.get()
        quota = Quota.objects.filter(project=project).earliest("pk")
        self.change_model = services.rule_change_create(
            user=self.ops,
            reason=REASON,
            edits=[services.EditSpec(target=quota, field="guarantee", value=quota.guarantee + 1)],
        )
        now = timezone.now()
        self.request_model = approval_services.request_create(
            user=self.ops,
            project=project,
            terms=Terms(
                kind=RequestKind.QUOTA_EXCEPTION,
                starts_at=now + timedelta(days=1),
                ends_at=now + timedelta(days=3),
                pool=self.pools[0],
                flavor=self.flavors[0],
                extra_gpus=4,
            ),
            justification="Benchmark",
            business_impact="Benchmark",
            submit=True,
        )

    def grow(self, projects: int) -> None:
        """Add projects up to ``projects`` with their members and quotas, and changes and
        requests in proportion (bulk, with history rows: see the module's docstring)."""
        start, self.projects = self.projects, projects
        new = range(start, projects)
        users = User.objects.bulk_create(
            [
                User(username=f"user-{i}-{n}", first_name=f"User {i}.{n}")
                for i in new
                for n in (0, 1, 2)
            ]
        )
        created = bulk_create_with_history(
            [
                Project(
                    slug=f"project-{i:05d}",
                    name=f"Project {i:05d}",
                    description="Benchmark project",
                    tier=self.tiers[i % 5] if i % 5 < 4 else None,
                )
                for i in new
            ],
            Project,
            default_user=self.ops,
            default_change_reason=REASON,
        )
        created = list(Project.objects.filter(slug__in=[p.slug for p in created]).order_by("slug"))
        bulk_create_with_history(
            [
                Membership(
                    project=project,
                    user=users[3 * index + n],
                    role=ProjectRole.LEAD if n == 0 else ProjectRole.MEMBER,
                )
                for index, project in enumerate(created)
                for n in (0, 1, 2)
            ],
            Membership,
            default_user=self.ops,
            default_change_reason=REASON,
        )
        today = timezone.localdate()
        bulk_create_with_history(
            [
                Quota(
                    project=project,
                    pool=pool,
                    flavor=flavor,
                    guarantee=2,
                    borrow_limit=4,
                    preemption_class=self.classes[index % 2],
                    last_reviewed_on=today,
                    next_review_on=today + timedelta(days=180 - index % 200),
                )
                for index, project in enumerate(created)
                for pool, flavor in zip(self.pools, self.flavors, strict=True)
            ],
            Quota,
            default_user=self.ops,
            default_change_reason=REASON,
        )
        # Changes and requests grow with the projects; the first size gets enough of them
        # (cycling over its projects) to fill more than one page of every list, so that each
        # size shows full pages and the figures compare like with like.
        if start:
            self._clone_changes(_at_least(created[::20], created, 60))
            self._clone_requests(_at_least(created[::25], created, 150))

    def _clone_changes(self, projects: list[Project]) -> None:
        edit = self.change_model.edits.get()
        quota_type = ContentType.objects.get_for_model(Quota)
        quotas = {q.project_id: q for q in Quota.objects.filter(project__in=set(projects))}
        changes = [RuleChange(**_fields(self.change_model)) for _ in projects]
        changes = bulk_create_with_history(
            changes, RuleChange, default_user=self.ops, default_change_reason=REASON
        )
        RuleEdit.objects.bulk_create(
            [
                RuleEdit(
                    **{
                        **_fields(edit),
                        "change_id": change.pk,
                        "content_type_id": quota_type.pk,
                        "object_id": quotas[project.pk].pk,
                    }
                )
                for change, project in zip(changes, projects, strict=True)
            ]
        )

    def _clone_requests(self, projects: list[Project]) -> None:
        stages = [RequestStage.SUBMITTED, RequestStage.DRAFT, RequestStage.REJECTED]
        bulk_create_with_history(
            [
                UpgradeRequest(
                    **{**_fields(self.request_model), "project_id": project.pk},
                    stage=stages[index % 3],
                )
                for index, project in enumerate(projects)
            ],
            UpgradeRequest,
            default_user=self.ops,
            default_change_reason=REASON,
        )


T = TypeVar("T")


def _at_least(picked: list[T], pool: list[T], count: int) -> list[T]:
    """``picked``, or ``count`` items cycling over ``pool`` if ``picked`` is shorter."""
    if len(picked) >= count or not pool:
        return picked
    return [pool[index % len(pool)] for index in range(count)]


def _fields(obj: Model) -> dict[str, Any]:
    """The concrete fields of ``obj`` but its key: a clone's keyword arguments."""
    return {
        field.attname: getattr(obj, field.attname)
        for field in obj._meta.concrete_fields
        if not field.primary_key and field.attname not in ("stage",)
    }


def targets() -> list[tuple[str, str]]:
    """(name, url) of every list page and API list, and the details that embed a list."""
    project = "project-00000"
    return [
        ("page: projects", reverse("project_list")),
        ("page: projects ?q=", reverse("project_list") + "?q=0042"),
        ("page: quotas", reverse("quota_list")),
        ("page: quotas ?pool=", reverse("quota_list") + "?pool=train&sort=-guarantee"),
        ("page: pools", reverse("pool_list")),
        ("page: flavors", reverse("flavor_list")),
        ("page: tiers", reverse("tier_list")),
        ("page: preemption classes", reverse("preemption_class_list")),
        ("page: changes", reverse("change_list")),
        ("page: changes ?author=", reverse("change_list") + "?author=bench-ops"),
        ("page: requests", reverse("request_list")),
        ("page: inbox (ops2)", reverse("inbox")),
        ("page: grants", reverse("project_grants", args=[project])),
        ("page: notifications", reverse("notification_list")),
        ("page: pool detail", reverse("pool_detail", args=["train"])),
        ("page: flavor detail", reverse("flavor_detail", args=["a100"])),
        ("page: class detail", reverse("preemption_class_detail", args=["cautious"])),
        ("page: tier detail", reverse("tier_detail", args=["key"])),
        ("page: project history", reverse("project_history", args=[project])),
        ("page: home", reverse("home")),
        ("page: people", reverse("person_list")),
        ("page: person detail", reverse("person_detail", args=["user-0-0"])),
        ("page: project detail", reverse("project_detail", args=[project])),
        # The first quota, change and request: made by the services, the same in every size.
        ("page: quota detail", reverse("quota_detail", args=[1])),
        ("page: change detail", reverse("change_detail", args=[1])),
        ("page: request detail", reverse("request_detail", args=[1])),
        ("api: projects", reverse("api_project_list")),
        ("api: project detail", reverse("api_project_detail", args=[project])),
        ("api: quota detail", reverse("api_quota_detail", args=[1])),
        ("api: pool detail", reverse("api_pool_detail", args=["train"])),
        ("api: quotas", reverse("api_quota_list")),
        ("api: pools", reverse("api_pool_list")),
        ("api: flavors", reverse("api_flavor_list")),
        ("api: tiers", reverse("api_tier_list")),
        ("api: preemption classes", reverse("api_preemption_class_list")),
        ("api: changes", reverse("api_change_list")),
        ("api: requests", reverse("api_request_list")),
        ("api: inbox (ops2)", reverse("api_inbox")),
        ("api: lookup users", reverse("api_lookup", args=["users"]) + "?q=user-1"),
        ("api: lookup projects", reverse("api_lookup", args=["projects"]) + "?q=project-0"),
    ]


def _exists(name: str) -> bool:
    with connection._nodb_cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone() is not None


def _wrapper(name: str) -> BaseDatabaseWrapper:
    """A connection of its own to database ``name``, with the default's settings."""
    settings_dict = {**connections.settings[DEFAULT_DB_ALIAS], "NAME": name}
    return connections[DEFAULT_DB_ALIAS].__class__(settings_dict, DEFAULT_DB_ALIAS)


def _switch(wrapper: BaseDatabaseWrapper) -> None:
    """Make ``wrapper`` the default connection (what the views and the services use)."""
    connections[DEFAULT_DB_ALIAS] = wrapper


def _ready(size: int) -> bool:
    """Whether the current database holds a finished fixture of ``size`` projects."""
    try:
        return User.objects.filter(username=FINISHED).exists() and Project.objects.count() == size
    except DatabaseError:
        return False


def build(size: int, name: str, *, rebuild: bool) -> BaseDatabaseWrapper:
    """The database of ``size`` projects: reused when a finished one exists (migrated to
    the code's schema), else built from scratch; vacuumed either way."""
    if not rebuild and _exists(name):
        wrapper = _wrapper(name)
        _switch(wrapper)
        call_command("migrate", verbosity=0, interactive=False)
        if _ready(size):
            print(f"{name}: reused ({size} projects)", flush=True)
            return _vacuumed(wrapper)
        wrapper.close()  # an unfinished build: start again
    with connection._nodb_cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        cursor.execute(f'CREATE DATABASE "{name}"')
    wrapper = _wrapper(name)
    _switch(wrapper)
    call_command("migrate", verbosity=0, interactive=False)
    ContentType.objects.clear_cache()
    began = time.perf_counter()
    Org().grow(size)
    User.objects.create_user(username=FINISHED, is_active=False)
    print(f"{name}: built {size} projects in {time.perf_counter() - began:.1f} s", flush=True)
    return _vacuumed(wrapper)


def _vacuumed(wrapper: BaseDatabaseWrapper) -> BaseDatabaseWrapper:
    # Bulk-loaded tables have no visibility map until a vacuum (autovacuum keeps one in
    # production): without it no index-only scan is possible and counts read the heap.
    with wrapper.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return wrapper


def measure(
    wrappers: dict[int, BaseDatabaseWrapper], rounds: int, *, only: str = ""
) -> dict[int, dict[str, dict[str, float]]]:
    """Every target at every size, interleaved: for each target, round after round, one
    request at each size in turn (each on its own open connection), so that the load of a
    shared machine falls on every size alike. The first round warms up."""
    clients: dict[int, tuple[Client, Client]] = {}
    for size, wrapper in wrappers.items():
        _switch(wrapper)
        ops, ops2 = Client(), Client()
        ops.force_login(User.objects.get(username="bench-ops"))
        # The tier owner: requests wait for someone else than the one who filed them.
        ops2.force_login(User.objects.get(username="bench-ops2"))
        clients[size] = (ops, ops2)
    figures: dict[int, dict[str, dict[str, float]]] = {size: {} for size in wrappers}
    for name, url in targets():
        if only not in name:
            continue
        times: dict[int, list[float]] = {size: [] for size in wrappers}
        work: dict[int, list[float]] = {size: [] for size in wrappers}
        process: dict[int, list[float]] = {size: [] for size in wrappers}
        shown: dict[int, tuple[int, int]] = {}
        order = list(wrappers)
        for run in range(rounds + 1):
            # Each round starts at another size, so none is always the first after a switch.
            for size in order[run % len(order) :] + order[: run % len(order)]:
                wrapper = wrappers[size]
                _switch(wrapper)
                client = clients[size][1 if "ops2" in name else 0]
                with CaptureQueriesContext(connection) as queries:
                    began, cpu = time.perf_counter(), time.process_time()
                    response = client.get(url)
                    elapsed = time.perf_counter() - began
                    cpu = time.process_time() - cpu
                assert response.status_code == 200, (name, size, response.status_code)
                if run:
                    times[size].append(elapsed)
                    # Less sensitive to the machine's load than the wall time: this
                    # process's CPU time plus the time of its queries.
                    db = sum(float(query["time"]) for query in queries.captured_queries)
                    work[size].append(cpu + db)
                    process[size].append(cpu)
                shown[size] = (len(queries), len(response.content))
        smallest = min(wrappers)
        for size in wrappers:
            figures[size][name] = {
                "ms": round(1000 * statistics.median(times[size]), 1),
                "min_ms": round(1000 * min(times[size]), 1),
                "cpu_db_ms": round(1000 * statistics.median(work[size]), 1),
                # This process's CPU time alone (the figure the peer is compared on).
                "cpu_ms": round(1000 * statistics.median(process[size]), 1),
                "queries": shown[size][0],
                "kb": round(shown[size][1] / 1024, 1),
                # The ratio to the smallest size round by round (requests made moments
                # apart, under the same load), then its median: the least noisy estimate.
                "paired_ratio": round(
                    statistics.median(
                        b / a for a, b in zip(times[smallest], times[size], strict=True)
                    ),
                    2,
                ),
            }
        print(
            f"{name:26}"
            + "".join(
                f"{figures[size][name]['ms']:>10}{figures[size][name]['cpu_ms']:>8} cpu"
                for size in wrappers
            ),
            flush=True,
        )
    return figures


def report(results: dict[int, dict[str, dict[str, float]]]) -> list[str]:
    """The table: per target and size the median and fastest time, the queries and the
    size; then the ratios largest/smallest of the medians, of the fastest times and the
    paired ratio (see ``measure``) and of the median CPU-and-query time; and the verdict:
    ``yes`` when the median, the queries and the size at the largest size are within 1.5×
    of the smallest and no page is over 150 KB; ``NO`` when not; ``noise`` when only the
    ratio of medians misses while the paired ratio or the ratio of CPU-and-query times is
    within 1.5× (load on the shared machine rather than the code: run it again)."""
    sizes = sorted(results)
    small, large = sizes[0], sizes[-1]
    head = (
        f"{'list':26}"
        + "".join(f"{f'{s} projects':>30}" for s in sizes)
        + f"{f'{large}/{small}':>32}  ok"
    )
    sub = (
        f"{'':26}"
        + "".join(f"{'median':>8}{'min':>8}{'queries':>8}{'KB':>6}" for _ in sizes)
        + f"{'median':>8}{'paired':>8}{'min':>8}{'cpu+db':>8}"
    )
    lines = [head, sub]
    misses, noisy = [], []
    for name in results[small]:
        cells = "".join(
            f"{results[s][name]['ms']:>8}{results[s][name]['min_ms']:>8}"
            f"{results[s][name]['queries']:>8}{results[s][name]['kb']:>6}"
            for s in sizes
        )
        a, b = results[small][name], results[large][name]
        ratio = b["ms"] / a["ms"] if a["ms"] else 0.0
        ratio_min = b["min_ms"] / a["min_ms"] if a["min_ms"] else 0.0
        paired = b["paired_ratio"]
        ratio_work = b["cpu_db_ms"] / a["cpu_db_ms"] if a["cpu_db_ms"] else 0.0
        shape_ok = (
            b["queries"] <= TARGET_RATIO * a["queries"]
            and b["kb"] <= TARGET_RATIO * max(a["kb"], 1)
            and max(results[s][name]["kb"] for s in sizes) * 1024 <= MAX_PAGE_BYTES
        )
        if shape_ok and ratio <= TARGET_RATIO:
            verdict = "yes"
        elif shape_ok and min(paired, ratio_work) <= TARGET_RATIO:
            verdict = "noise"
            noisy.append(name)
        else:
            verdict = "NO"
            misses.append(name)
        lines.append(
            f"{name:26}{cells}{ratio:>7.2f}×{paired:>7.2f}×{ratio_min:>7.2f}×{ratio_work:>7.2f}×"
            f"  {verdict}"
        )
    lines.append(f"misses: {', '.join(misses) if misses else 'none'}")
    lines.append(f"noise (run again): {', '.join(noisy) if noisy else 'none'}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--rounds", type=int, default=11, help="measured rounds per target")
    parser.add_argument(
        "--rebuild", action="store_true", help="build every size again even if it exists"
    )
    parser.add_argument("--only", default="", help="only the targets whose name contains this")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("bench/pages.py needs PostgreSQL: set DATABASE_URL (see the docstring).")
    sizes = sorted(int(size) for size in args.sizes.split(","))
    settings.ALLOWED_HOSTS = ["testserver"]
    setup_test_environment()
    base = connection.settings_dict["NAME"]
    wrappers = {size: build(size, f"{base}_{size}", rebuild=args.rebuild) for size in sizes}
    try:
        results = measure(wrappers, args.rounds, only=args.only)
    finally:
        for wrapper in wrappers.values():
            wrapper.close()
    lines = report(results)
    print("\n".join(lines))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    # With --only: a part of the lists, in a file of its own.
    out = ROOT / "bench" / "results" / f"pages-{stamp}{'-only' if args.only else ''}.json"
    out.write_text(
        json.dumps(
            {
                "database": "postgresql",
                "rounds": args.rounds,
                "only": args.only,
                "interleaved": True,
                "target": {"ratio": TARGET_RATIO, "max_page_bytes": MAX_PAGE_BYTES},
                "results": {str(size): figures for size, figures in results.items()},
                "table": lines,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
