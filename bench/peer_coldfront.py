"""Benchmark: Arbiter's pages side by side with ColdFront 1.1.10's, on the same organisation.

Run on demand (not part of the test suite), from the repository root, on PostgreSQL:

    DATABASE_URL=postgres://USER@HOST:5432/DB DJANGO_DEBUG=1 \
        nice .venv/bin/python bench/peer_coldfront.py \
        [--sizes 1000] [--rounds 4] [--rebuild] [--only NAME]

The peer. ColdFront 1.1.10 (an HPC allocation portal, Django) is installed, the first time, into
a virtual environment of its own in a cache outside the work tree: ``$ARBITER_PEER_CACHE``, else
``~/.cache/arbiter-peer``, as ``coldfront-1.1.10/`` (``pip install coldfront==1.1.10
psycopg2-binary``: ColdFront brings its own Django, 5.2, as its requirements say; the binary
PostgreSQL driver stands for its ``pg`` extra, which compiles ``psycopg2``). Nothing in Arbiter
imports ColdFront and the tests never need it: ColdFront runs only in processes of its own venv,
with its own settings (``coldfront.config.settings``, configured by environment variables:
``DB_URL``, ``SECRET_KEY``, ``DEBUG`` as Arbiter's).

The data. Arbiter's organisation of ``size`` projects is bench/pages.py's, in the same database
``<DB>_<size>`` (built or reused by bench/pages.py's code). ColdFront's is built in
``<DB>_coldfront_<size>`` (reused when finished, rebuilt with ``--rebuild``): ``coldfront
initial_setup`` (its migrations and default choices), then bench/peer_coldfront_load.py in
ColdFront's venv: per project its PI and 2 project users, 2 allocations on 2 cluster resources
(Arbiter's 2 quotas in 2 pools) with the 3 users and 2 attributes each; as many pending
allocation change requests as Arbiter has rule changes, and as many allocations waiting for
review ("New") as Arbiter has upgrade requests. Both signed in as an ops user: Arbiter's
``bench-ops`` (``bench-ops2`` for the inbox, as in bench/pages.py), ColdFront's ``bench-ops``
(staff and superuser; its lists are asked with ``show_all_*`` so that they list everything, as
Arbiter's do for ops).

The measure. ColdFront's pages are served by bench/peer_coldfront_serve.py, a loop in ColdFront's
venv that gets each path it is sent with Django's test Client and answers the wall time, the CPU
time of its own process (``time.process_time``), the queries and the size. Arbiter's pages are
got in this process the same way. For each pair, one warm-up round then ``--rounds`` rounds, each
an Arbiter request then the peer's, moments apart, so the load of a shared machine falls on
both alike. Per pair it reports the median wall ms, the median CPU ms of the rendering process,
the queries and the KB of each side, and the CPU ratio Arbiter/peer (of the medians; and the
median of the round-by-round ratios). Target (issue 41): every page at or below 1.0× the peer's
CPU. It prints the table and writes ``bench/results/peer_coldfront-<timestamp>.json``.

The pairs (Arbiter → ColdFront): home → the signed-in portal home; project list → project list;
project detail → project detail; quota list → allocation list; quota detail → allocation
detail; change list → allocation change list; request list and inbox → the allocation request
list (ColdFront's list of allocations waiting for an administrator's review: the closest to
both); pool list → the center summary. Two more rows: the home page with Arbiter's cache
emptied before each of its requests (its cost right after the rules change), and the project
list at the peer's page size (``?size=25``; Arbiter's default page holds 50 rows).
"""

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
os.environ.setdefault("DJANGO_DEBUG", "1")

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.db import connection, connections  # noqa: E402
from django.db.backends.base.base import BaseDatabaseWrapper  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from django.urls import reverse  # noqa: E402

from approvals.models import UpgradeRequest  # noqa: E402
from bench.pages import _exists, _switch, _wrapper, build  # noqa: E402
from governance.models import RuleChange, User  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VERSION = "1.1.10"
FINISHED = "bench-fixture-finished"


def cache_dir() -> Path:
    return Path(os.environ.get("ARBITER_PEER_CACHE") or Path.home() / ".cache" / "arbiter-peer")


def peer_venv() -> Path:
    """ColdFront's virtual environment, installed the first time."""
    venv = cache_dir() / f"coldfront-{VERSION}"
    if (venv / "bin" / "coldfront").exists():
        return venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    print(f"installing ColdFront {VERSION} into {venv} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "--quiet",
            f"coldfront=={VERSION}",
            "psycopg2-binary",
        ],
        check=True,
    )
    return venv


def peer_env(name: str) -> dict[str, str]:
    """The environment of ColdFront's processes: its settings, on database ``name``."""
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    url = f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{name}"
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.update(
        DB_URL=url,
        SECRET_KEY=secrets.token_hex(16),
        DEBUG="True" if settings.DEBUG else "False",
        DJANGO_SETTINGS_MODULE="coldfront.config.settings",
    )
    return env


def _peer_ready(name: str) -> bool:
    if not _exists(name):
        return False
    wrapper = _wrapper(name)
    try:
        with wrapper.cursor() as cursor:
            cursor.execute("SELECT 1 FROM auth_user WHERE username = %s", [FINISHED])
            return cursor.fetchone() is not None
    except Exception:
        return False
    finally:
        wrapper.close()


def build_peer(size: int, name: str, venv: Path, *, rebuild: bool) -> None:
    """ColdFront's database of ``size`` projects, with as many changes and requests as
    Arbiter's (the current default connection)."""
    if not rebuild and _peer_ready(name):
        print(f"{name}: reused ({size} projects)", flush=True)
        return
    changes, requests = RuleChange.objects.count(), UpgradeRequest.objects.count()
    with connection._nodb_cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        cursor.execute(f'CREATE DATABASE "{name}"')
    env = peer_env(name)
    began = time.perf_counter()
    subprocess.run(
        [str(venv / "bin" / "coldfront"), "initial_setup", "-f"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            str(ROOT / "bench" / "peer_coldfront_load.py"),
            f"--projects={size}",
            f"--changes={changes}",
            f"--requests={requests}",
        ],
        env=env,
        check=True,
    )
    wrapper = _wrapper(name)
    with wrapper.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    wrapper.close()
    print(f"{name}: built {size} projects in {time.perf_counter() - began:.1f} s", flush=True)


class Peer:
    """bench/peer_coldfront_serve.py, running in ColdFront's venv: send a path, read figures."""

    def __init__(self, venv: Path, name: str) -> None:
        self.process = subprocess.Popen(
            [str(venv / "bin" / "python"), str(ROOT / "bench" / "peer_coldfront_serve.py")],
            env=peer_env(name),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.hello = self._read()

    def _read(self) -> dict[str, Any]:
        out: IO[str] | None = self.process.stdout
        assert out is not None
        for line in out:
            if line.startswith("@@"):
                return dict(json.loads(line[2:]))
        raise RuntimeError(f"the ColdFront server stopped (exit {self.process.wait()})")

    def get(self, path: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(path + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=30)


class Pair(NamedTuple):
    name: str
    url: str  # Arbiter's page
    path: str  # ColdFront's page
    ops2: bool = False  # Arbiter's page asked by bench-ops2 (the inbox, as bench/pages.py)
    cold: bool = False  # Arbiter's cache emptied before each of its requests


def pairs() -> list[Pair]:
    """The pages compared. The first project, quota and allocation are the same project's in
    both (project-00000 / Project 00000). Two more rows tell what the others do not: the home
    page with its cache emptied before each request (its cost when the rules have just
    changed), and the project list at the peer's page size (25 rows; Arbiter's default is 50)."""
    project = "project-00000"
    projects = reverse("project_list")
    return [
        Pair("home", reverse("home"), "/"),
        Pair("home, cache emptied", reverse("home"), "/", cold=True),
        Pair("project list", projects, "/project/?show_all_projects=on"),
        Pair("project list, 25 rows", projects + "?size=25", "/project/?show_all_projects=on"),
        Pair("project detail", reverse("project_detail", args=[project]), "/project/1/"),
        Pair(
            "quota list ↔ allocations",
            reverse("quota_list"),
            "/allocation/?show_all_allocations=on",
        ),
        Pair("quota ↔ allocation detail", reverse("quota_detail", args=[1]), "/allocation/1/"),
        Pair("change list", reverse("change_list"), "/allocation/change-list"),
        Pair("request list ↔ requests", reverse("request_list"), "/allocation/request-list"),
        Pair("inbox (ops2) ↔ requests", reverse("inbox"), "/allocation/request-list", ops2=True),
        Pair("pool list ↔ center summary", reverse("pool_list"), "/center-summary"),
    ]


def _ours(client: Client, url: str) -> dict[str, Any]:
    connection.queries_log.clear()  # counted right past the log's 9,000 queries
    with CaptureQueriesContext(connection) as queries:
        began, cpu = time.perf_counter(), time.process_time()
        response = client.get(url)
        content = response.content
        elapsed = time.perf_counter() - began
        cpu = time.process_time() - cpu
    return {
        "status": response.status_code,
        "wall": elapsed,
        "cpu": cpu,
        "queries": len(queries),
        "bytes": len(content),
    }


def _summary(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {
        "ms": round(1000 * statistics.median(r["wall"] for r in runs), 1),
        "cpu_ms": round(1000 * statistics.median(r["cpu"] for r in runs), 1),
        "queries": runs[-1]["queries"],
        "kb": round(runs[-1]["bytes"] / 1024, 1),
    }


def measure(wrapper: BaseDatabaseWrapper, peer: Peer, rounds: int, only: str) -> dict[str, Any]:
    _switch(wrapper)
    ops, ops2 = Client(), Client()
    ops.force_login(User.objects.get(username="bench-ops"))
    ops2.force_login(User.objects.get(username="bench-ops2"))
    figures: dict[str, Any] = {}
    for name, url, path, as_ops2, cold in pairs():
        if only not in name:
            continue
        ours: list[dict[str, Any]] = []
        theirs: list[dict[str, Any]] = []
        for run in range(rounds + 1):
            if cold:
                cache.clear()
            a = _ours(ops2 if as_ops2 else ops, url)
            b = peer.get(path)
            assert a["status"] == 200 and b["status"] == 200, (name, a["status"], b["status"])
            if run:  # the first round warms up
                ours.append(a)
                theirs.append(b)
        mine, peer_figures = _summary(ours), _summary(theirs)
        figures[name] = {
            "arbiter": {"url": url, **mine},
            "coldfront": {"path": path, **peer_figures},
            "cpu_ratio": round(mine["cpu_ms"] / peer_figures["cpu_ms"], 2),
            "paired_cpu_ratio": round(
                statistics.median(a["cpu"] / b["cpu"] for a, b in zip(ours, theirs, strict=True)),
                2,
            ),
        }
        print(_line(name, figures[name]), flush=True)
    return figures


def _line(name: str, f: dict[str, Any]) -> str:
    a, b = f["arbiter"], f["coldfront"]
    verdict = "yes" if f["cpu_ratio"] <= 1.0 else "NO"
    return (
        f"{name:28}{a['ms']:>8}{a['cpu_ms']:>8}{a['queries']:>5}{a['kb']:>7}"
        f"{b['ms']:>9}{b['cpu_ms']:>8}{b['queries']:>5}{b['kb']:>7}"
        f"{f['cpu_ratio']:>8.2f}×{f['paired_cpu_ratio']:>7.2f}×  {verdict}"
    )


HEAD = [
    f"{'page (Arbiter ↔ ColdFront)':28}{'Arbiter':>28}{'ColdFront 1.1.10':>29}"
    f"{'CPU ratio':>17}  ≤1.0",
    f"{'':28}{'ms':>8}{'cpu':>8}{'sql':>5}{'KB':>7}{'ms':>9}{'cpu':>8}{'sql':>5}{'KB':>7}"
    f"{'median':>9}{'paired':>8}",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--rounds", type=int, default=4, help="measured rounds (alternations)")
    parser.add_argument("--rebuild", action="store_true", help="build ColdFront's data again")
    parser.add_argument("--only", default="", help="only the pairs whose name contains this")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("bench/peer_coldfront.py needs PostgreSQL: set DATABASE_URL (see the docstring).")
    settings.ALLOWED_HOSTS = ["testserver"]
    setup_test_environment()
    venv = peer_venv()
    base = connection.settings_dict["NAME"]
    results: dict[str, Any] = {}
    tables: dict[str, list[str]] = {}
    for size in sorted(int(s) for s in args.sizes.split(",")):
        wrapper = build(size, f"{base}_{size}", rebuild=False)
        peer_name = f"{base}_coldfront_{size}"
        build_peer(size, peer_name, venv, rebuild=args.rebuild)
        peer = Peer(venv, peer_name)
        print(f"\n{size} projects (ColdFront {VERSION} on Django {peer.hello['django']})")
        print("\n".join(HEAD), flush=True)
        try:
            results[str(size)] = measure(wrapper, peer, args.rounds, args.only)
        finally:
            peer.close()
            wrapper.close()
            connections[connection.alias].close()
        tables[str(size)] = HEAD + [_line(n, f) for n, f in results[str(size)].items()]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = ROOT / "bench" / "results" / f"peer_coldfront-{stamp}{'-only' if args.only else ''}.json"
    out.write_text(
        json.dumps(
            {
                "peer": f"ColdFront {VERSION}",
                "database": "postgresql",
                "rounds": args.rounds,
                "debug": settings.DEBUG,
                "only": args.only,
                "target_cpu_ratio": 1.0,
                "results": results,
                "table": tables,
            },
            indent=2,
            ensure_ascii=False,
        )
        + "\n"
    )
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
