"""docker-compose.yml run with podman (deploy/containers/stack.sh, the README's commands in
"Running in production", each run here): PostgreSQL, Redis, the
migration, two web servers behind nginx, a Celery worker and beat, all healthy. Over HTTP
only, as a person would: the README's walk-through (``ops`` proposes a quota change, ``ops2``
approves and applies it), a replay of the change run by the worker container, the session of
one web server used through the other, then the stack stopped and started again with every
row kept.

Marked ``containers``: runs when ``ARBITER_CONTAINER_IMAGE`` names the image the stack uses
(``.ci/run`` builds the images in the background, and this file waits for them: tests/ci_labs.py;
without it the test skips, and fails in CI). The stack
runs as the compose project ``arbiter-test`` (or ``ARBITER_STACK_PROJECT``) on the ports
stack.sh chooses (or those in the environment); its volumes are removed before and after.
"""

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings

from governance.services.demo import DEMO_PASSWORD
from tests.conftest import require_service
from tests.governance.stack_http import Browser

pytestmark = pytest.mark.containers

README = settings.BASE_DIR / "README.md"
STACK_SCRIPT = "deploy/containers/stack.sh"
RAN: set[str] = set()
PROJECT = os.environ.get("ARBITER_STACK_PROJECT", "arbiter-test")
PORTS = {
    "POSTGRES_PORT": os.environ.get("POSTGRES_PORT", "15432"),
    "REDIS_PORT": os.environ.get("REDIS_PORT", "16379"),
    "ARBITER_WEB_PORT": os.environ.get("ARBITER_WEB_PORT", "18000"),
    "ARBITER_WEB2_PORT": os.environ.get("ARBITER_WEB2_PORT", "18001"),
    "ARBITER_PROXY_PORT": os.environ.get("ARBITER_PROXY_PORT", "18080"),
}
PROXY = f"http://127.0.0.1:{PORTS['ARBITER_PROXY_PORT']}"
WEB = f"http://127.0.0.1:{PORTS['ARBITER_WEB_PORT']}"
WEB2 = f"http://127.0.0.1:{PORTS['ARBITER_WEB2_PORT']}"
SERVICES = ["postgres", "redis", "migrate", "web", "web2", "worker", "beat", "proxy"]
REASON = "Model v3 needs more A100 until March"
SEED = "python manage.py seed_demo"


def readme_stack_block() -> list[str]:
    """The README's commands for the stack ("Running in production"), comments dropped."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.DOTALL)
    (block,) = [block for block in blocks if block.startswith(f"bash {STACK_SCRIPT} build")]
    return [line.split("  #")[0].strip() for line in block.splitlines()]


def _readme(verb: str) -> subprocess.CompletedProcess:
    """Run the README's line ``bash deploy/containers/stack.sh <verb> ...``."""
    (line,) = [
        line for line in readme_stack_block() if line.startswith(f"bash {STACK_SCRIPT} {verb}")
    ]
    RAN.add(line)
    return _stack(line)


def _stack(command: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        **PORTS,
        "ARBITER_STACK_PROJECT": PROJECT,
        "ARBITER_STACK_DIR": str(Path(settings.DATA_DIR) / "containers-test"),
        "ARBITER_IMAGE": os.environ["ARBITER_CONTAINER_IMAGE"],
    }
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", command],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=settings.BASE_DIR,
        check=False,
    )
    assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    return done


def _podman(*args: str) -> str:
    done = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def _container(service: str) -> str:
    return f"{PROJECT}_{service}_1"


def _rows() -> dict[str, set[str]]:
    """Every row of every table of the stack's database, as a digest per row."""
    sql = "select table_name from information_schema.tables where table_schema = 'public'"
    psql = ["exec", _container("postgres"), "psql", "-U", "arbiter", "-d", "arbiter", "-tAc"]
    tables = _podman(*psql, sql).split()
    digests = " union all ".join(f"select '{t}', md5(x::text) from \"{t}\" x" for t in tables)
    rows: dict[str, set[str]] = {table: set() for table in tables}
    for line in _podman(*psql, digests, "-F", "\t").strip().splitlines():
        table, digest = line.split("\t")
        rows[table].add(digest)
    return rows


@pytest.fixture(scope="module")
def stack() -> Iterator[None]:
    image = os.environ.get("ARBITER_CONTAINER_IMAGE", "")
    require_service(
        "the compose stack",
        bool(image) and shutil.which("podman") is not None,
        "set ARBITER_CONTAINER_IMAGE (deploy/containers/stack.sh build) and install podman",
    )
    _readme("build")  # cached: .ci/run's deploy/ci/labs.sh has built the images already
    _stack(f"bash {STACK_SCRIPT} destroy")  # from empty volumes
    _readme("up")
    # The demo seeded by both web containers at the same moment (a race once seen here): the
    # demo's lock lets one load it, and the other then finds it loaded.
    with ThreadPoolExecutor(2) as pool:
        web2 = pool.submit(_stack, f"bash {STACK_SCRIPT} compose exec -T web2 {SEED}")
        web = pool.submit(_readme, f"compose exec -T web {SEED}")
        said = sorted(done.result().stdout.strip().splitlines()[-1] for done in (web, web2))
    assert said[0].startswith("Demo data already loaded") and said[1].startswith(
        "Demo data loaded"
    ), said
    yield
    if not os.environ.get("ARBITER_STACK_KEEP"):
        _stack(f"bash {STACK_SCRIPT} destroy")


def test_every_service_runs_and_is_healthy(stack):
    for service in SERVICES:
        state = _podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}",
                        _container(service)).split()  # fmt: skip
        assert state == (["exited", "0"] if service == "migrate" else ["running", "0"]), service
    for service in ["postgres", "redis", "web", "web2", "worker", "beat"]:
        _podman("healthcheck", "run", _container(service))  # fails unless healthy
    user = _podman("exec", _container("web"), "id", "-u").strip()
    assert user != "0"


def test_two_web_servers_share_sessions(stack):
    browser = Browser(WEB)
    browser.sign_in("ops", DEMO_PASSWORD)
    page = browser.request("/", base_url=WEB2)
    assert page.status == 200 and page.url == WEB2 + "/", page.url
    assert "Log out" in page.text
    # Behind the proxy both answer, with the same session.
    upstreams = set()
    for _ in range(4):
        page = browser.request("/", base_url=PROXY)
        assert page.url == PROXY + "/" and "Log out" in page.text
        upstreams.update(page.upstreams)
    assert upstreams == {WEB.removeprefix("http://"), WEB2.removeprefix("http://")}


def _quota_pk(browser: Browser) -> int:
    rows = browser.request("/api/v1/quotas/?project=vision").json()["results"]
    for row in rows:
        if (row["pool"], row["flavor"]) == ("training", "a100-80g"):
            return int(row["id"])
    raise AssertionError(rows)


def _guarantee(browser: Browser, pk: int) -> int:
    return int(browser.request(f"/api/v1/quotas/{pk}/").json()["guarantee"])


def test_the_walkthrough_over_http_a_task_in_the_worker_and_a_restart(stack):
    ops = Browser(PROXY)
    ops.sign_in("ops", DEMO_PASSWORD)
    pk = _quota_pk(ops)
    before = _guarantee(ops, pk)
    page = ops.request(f"/quotas/{pk}/edit/")
    form = page.form(containing="guarantee")
    proposed = ops.submit(page, form, guarantee=str(before + 4), reason=REASON)
    match = re.search(r"/changes/(\d+)/$", proposed.url)
    assert match, (proposed.url, proposed.text[-2000:])
    change = int(match.group(1))

    # A what-if replay of the change: queued by the web server, run by the worker container.
    queued = ops.request(f"/api/v1/changes/{change}/replay/", json_body={})
    assert queued.status == 202, queued.text
    deadline = time.monotonic() + 300
    while (run := ops.request(f"/api/v1/changes/{change}/replay/").json())["status"] in (
        "queued",
        "running",
    ):
        assert time.monotonic() < deadline, run
        time.sleep(2)
    assert run["status"] == "done", run
    logs = _podman("logs", _container("worker"))
    assert re.search(r"Task queues\.tasks\.change_replay\[[\w-]+\] succeeded", logs), logs[-3000:]

    ops2 = Browser(PROXY)
    ops2.sign_in("ops2", DEMO_PASSWORD)
    for step in ("approve", "apply"):
        page = ops2.request(f"/changes/{change}/")
        done = ops2.submit(page, page.form(action=f"/changes/{change}/{step}/"))
        assert done.status == 200 and done.url.endswith(f"/changes/{change}/"), done.url
    assert _guarantee(ops2, pk) == before + 4
    history = ops2.request(f"/quotas/{pk}/history/").text
    assert REASON in history and "Lena Fischer" in history  # the demo's ops2 applied it

    rows = _rows()
    assert len(rows["governance_rulechange"]) >= 1 and len(rows["governance_quota"]) > 20
    _readme("down")
    assert PROJECT + "_web_1" not in _podman("ps", "-a", "--format", "{{.Names}}")
    _readme("up")
    # Every row is kept as it was (beat may have added rows since, e.g. a workload rollup).
    after = _rows()
    assert {
        t: len(r - after.get(t, set())) for t, r in rows.items() if r - after.get(t, set())
    } == {}
    again = Browser(PROXY)
    again.sign_in("ops2", DEMO_PASSWORD)
    assert _guarantee(again, pk) == before + 4
    assert "applied" in again.request(f"/api/v1/changes/{change}/").json()["status"]
    assert set(readme_stack_block()) == RAN, "every line of the README's block runs here"
