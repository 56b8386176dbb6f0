"""The compose stack's worker container syncs the lab Slurm on the host, as a site's would
sync a controller on another host: the worker (host network) gets only a client
``slurm.conf`` and the cluster's munge key as mounted files (its own munged, the image's Slurm
client), the cluster's table delivery is "pull", so the sync writes no table, and the real
pull agent (deploy/slurm-agent/arbiter-table-agent) on the controller's side fetches it over
HTTP from the stack's web server with a token bound to the cluster (``manage.py
agent_token_create`` run in the web container). Then Slurm itself shows the rules: the QOS
the container made, a GPU request rewritten and one over quota refused at submit.

Marked ``containers`` and needs the Slurm lab (``deploy/slurm/up.sh``, found as the other
Slurm tests find it): skips without the image (``ARBITER_CONTAINER_IMAGE``), podman or the
lab, fails in CI. Runs as root (a Slurm administrator for the image's user is added on the
host, as a site does for Arbiter's account). The stack is the compose project
``arbiter-slurm-test`` (``ARBITER_SLURM_STACK_PROJECT``) on the ports of the environment or
stack.sh's; its volumes are removed before and after.

Then the Slurm truth checks themselves (imported from test_slurm_submit.py and
test_slurm_tier_cap.py, unchanged) run with every sync and every guard tick executed by the
compose file's worker service (``compose run``: its image, start-worker.sh with munged, the
mounted slurm.conf and munge key) as Celery tasks, against the tests' own database and broker,
and the table delivered only by the pull agent: the rewrite and refusal at submit, the strict
sampling of every QOS and request form, the tier cap. The cluster's ``SLURM_CONF`` is the
container's path, which does not exist on the host: nothing in the test process reaches Slurm
through Arbiter (the tests' own sbatch and squeue use the lab's file).
"""

import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.db import transaction

from governance.celery import app
from queues import services
from queues.models import SyncRun, SyncStatus, SyncTrigger
from queues.services.slurm.submit import TABLE_NAME
from queues.tasks import guard_clusters
from tests.conftest import REASON, require_service
from tests.governance.test_worker import _test_database_url
from tests.queues import test_slurm_submit as submit_truth
from tests.queues import test_slurm_tier_cap as tier_cap_truth
from tests.queues.conftest import (
    SLURM_CLUSTER,
    Delivery,
    Lab,
    Slurm,
    _slurm_answers,
    delivery_for,
    slurm_conf,
)
from tests.queues.pull_agent import AGENT
from tests.queues.test_slurm_submit import _sbatch

pytestmark = pytest.mark.containers

STACK_SCRIPT = "deploy/containers/stack.sh"
PROJECT = os.environ.get("ARBITER_SLURM_STACK_PROJECT", "arbiter-slurm-test")
STATE = Path(settings.DATA_DIR) / "containers-slurm-test"
# Ports of its own (not test_container_stack.py's): under pytest-xdist this test runs with the
# Slurm lab's group, beside the containers group's stack.
PORTS = {
    "POSTGRES_PORT": os.environ.get("ARBITER_SLURM_STACK_POSTGRES_PORT", "25432"),
    "REDIS_PORT": os.environ.get("ARBITER_SLURM_STACK_REDIS_PORT", "26379"),
    "ARBITER_WEB_PORT": os.environ.get("ARBITER_SLURM_STACK_WEB_PORT", "28000"),
    "ARBITER_WEB2_PORT": os.environ.get("ARBITER_SLURM_STACK_WEB2_PORT", "28001"),
    "ARBITER_PROXY_PORT": os.environ.get("ARBITER_SLURM_STACK_PROXY_PORT", "28080"),
}
WEB = f"http://127.0.0.1:{PORTS['ARBITER_WEB_PORT']}"
MUNGE_SOCKET = "/run/munge/munge.socket.2"  # the worker's munged (deploy/start-worker.sh)
CLUSTER = "lab"

# Run in the worker container (it reaches Slurm): the lab's rules, the cluster with its
# table pulled, then a sync queued to the Celery worker; prints the run's id.
SETUP = f"""
from django.db import transaction
from governance import services as rules
from governance.models import ProjectRole, SiteRole, User
from queues import services
from queues.models import SubmitTableDelivery, SyncTrigger
ops = User.objects.create_user(username="ops", password=None, site_role=SiteRole.OPS)
kw = {{"user": ops, "reason": "Lab rules for the container sync"}}
a100 = rules.flavor_create(**kw, slug="a100", name="A100", gpu_model="A100", memory_gb=80,
                           gres_type="a100")
pool = rules.pool_create(**kw, slug="lab", name="Lab")
rules.pool_capacity_set(**kw, pool=pool, flavor=a100, gpus=4)
regular = rules.tier_create(**kw, slug="regular", name="Regular", score=40,
    scheduler_value=400, is_default=True, eligibility="Any", confirmed_by="Ops",
    review_cycle_days=90, owner=ops)
allowed = rules.preemption_class_create(**kw, slug="allowed", name="Allowed",
    kind="allowed", business_impact="Restartable.")
alpha = rules.project_create(**kw, slug="alpha", name="Alpha", tier=regular)
# Jobs run as root (the lab's only submitter), so root is the project's member.
root = User.objects.create_user(username="root", password=None)
rules.membership_set(**kw, project=alpha, member=root, role=ProjectRole.LEAD)
rules.quota_create(**kw, project=alpha, pool=pool, flavor=a100, guarantee=1, borrow_limit=2,
                   preemption_class=allowed)
cluster = services.cluster_create(**kw, name="{CLUSTER}", slurm_cluster="{SLURM_CLUSTER}",
                                  slurm_conf="/etc/slurm/slurm.conf", pools=[pool])
services.cluster_update(cluster=cluster, **kw,
                        data={{"submit_table_delivery": SubmitTableDelivery.PULL}})
with transaction.atomic():
    run = services.sync_enqueue(cluster=cluster, trigger=SyncTrigger.MANUAL, user=ops)
print("run", run.pk)
"""

STATUS = """
from queues.models import SyncRun
import json
run = SyncRun.objects.get(pk={run})
print(json.dumps({{"status": run.status, "error": run.error}}))
"""


def _stack(*args: str, timeout: int = 900, project: str = PROJECT) -> str:
    env = {
        **os.environ,
        **PORTS,
        "ARBITER_STACK_PROJECT": project,
        "ARBITER_STACK_DIR": str(STATE),
        "ARBITER_IMAGE": os.environ["ARBITER_CONTAINER_IMAGE"],
        "ARBITER_SLURM_CONF_FILE": str(STATE / "client" / "slurm.conf"),
        "ARBITER_MUNGE_KEY_FILE": str(STATE / "client" / "munge.key"),
    }
    done = subprocess.run(
        ["bash", STACK_SCRIPT, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=settings.BASE_DIR,
        check=False,
    )
    assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _in(service: str, code: str) -> str:
    """Python ``code`` run by ``manage.py shell`` in a container of the stack."""
    return _stack("compose", "exec", "-T", service, "python", "manage.py", "shell", "-c", code)


def _client_files(conf: str) -> None:
    """What a site gives the worker: the cluster's slurm.conf, its munge socket the worker's
    own, and the munge key, readable by the image's user (in a directory only root opens)."""
    client = STATE / "client"
    client.mkdir(parents=True, exist_ok=True)
    client.chmod(0o700)
    text = Path(conf).read_text()
    host_socket = re.search(r"^AuthInfo=socket=([^,\s]+)", text, flags=re.MULTILINE)
    assert host_socket, "the lab's slurm.conf names no munge socket"
    (client / "slurm.conf").write_text(text.replace(host_socket.group(1), MUNGE_SOCKET))
    key = Path(conf).parent.parent / "munge" / "munge.key"
    shutil.copyfile(key, client / "munge.key")
    (client / "munge.key").chmod(0o444)


def _slurm_admin(slurm: Slurm, uid: int, name: str) -> None:
    """The image's user is a Slurm administrator on the controller: slurmdbd knows a client
    by the uid in its munge credential and sacctmgr by the name the container gives that uid,
    so the controller host needs that user (made here if missing, as a site would)."""
    try:
        known = pwd.getpwuid(uid).pw_name
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--uid", str(uid), "--no-create-home",
             "--shell", "/usr/sbin/nologin", name],
            check=True, capture_output=True,
        )  # fmt: skip
        known = name
    assert known == name, f"uid {uid} is {known} on this host, {name} in the image"
    slurm.run(
        "sacctmgr", "-i", "add", "user", name, "account=root", "adminlevel=Administrator",
        check=False,
    )  # fmt: skip
    assert "Administrator" in slurm.sacctmgr("-n", "-P", "show", "user", name, "format=admin")


@pytest.fixture
def stack(slurm: Slurm) -> Iterator[None]:
    image = os.environ.get("ARBITER_CONTAINER_IMAGE", "")
    require_service(
        "the compose stack",
        bool(image) and shutil.which("podman") is not None,
        "set ARBITER_CONTAINER_IMAGE (deploy/containers/stack.sh build) and install podman",
    )
    _client_files(slurm.conf)
    _stack("destroy")
    _stack("up")
    yield
    if not os.environ.get("ARBITER_STACK_KEEP"):
        _stack("destroy")


def test_the_worker_container_syncs_the_hosts_slurm_and_the_agent_delivers_the_table(slurm, stack):
    table = Path(slurm.conf).parent / TABLE_NAME
    table.unlink(missing_ok=True)
    uid, name = _stack("compose", "exec", "-T", "worker", "sh", "-c", "id -u; id -un").split()[-2:]
    _slurm_admin(slurm, int(uid), name)
    started = time.monotonic()
    run = re.search(r"^run (\d+)$", _in("worker", SETUP), flags=re.MULTILINE)
    assert run, "no sync queued"
    deadline = time.monotonic() + 180
    while True:
        state = json.loads(_in("web", STATUS.format(run=run.group(1))).strip().splitlines()[-1])
        if state["status"] not in ("queued", "running", "retrying") or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert state["status"] == "succeeded", state
    print(f"sync by the worker container: {time.monotonic() - started:.1f} s")
    # The QOS and the project's account, made by the container's sync.
    qos = slurm.sacctmgr("-n", "-P", "show", "qos", "format=name,description")
    assert any(row.startswith("regular|arbiter:") for row in qos.splitlines()), qos
    account = "lab.alpha"
    assert account in slurm.sacctmgr("-n", "-P", "show", "account", "format=account").split()
    # Pull delivery: the sync wrote no table; the agent gets it with a cluster-bound token.
    assert not table.exists(), "the sync wrote the table the agent delivers"
    key = _stack("compose", "exec", "-T", "web", "python", "manage.py", "agent_token_create",
                 "--cluster", CLUSTER, "--user", "ops").strip().splitlines()[-1]  # fmt: skip
    token_file = STATE / "agent.token"
    token_file.write_text(key + "\n")
    token_file.chmod(0o600)
    fetched = subprocess.run(
        ["sh", str(AGENT)],
        env={
            "PATH": os.environ["PATH"],
            "ARBITER_URL": WEB,
            "ARBITER_CLUSTER": CLUSTER,
            "ARBITER_TOKEN_FILE": str(token_file),
            "ARBITER_TABLE_DIR": str(table.parent),
            "ARBITER_TIMEOUT": "20",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert fetched.returncode == 0, fetched.stderr
    assert table.exists()
    # Slurm holds the rules at submit: rewritten, refused over the project's maximum.
    job, said = _sbatch(slurm, "--gres=gpu:1", account=account, qos="regular")
    assert job and "rewrote the untyped request gpu:1 to gpu:a100:1" in said, said
    job, said = _sbatch(slurm, "--gres=gpu:a100:4", account=account, qos="regular")
    assert not job and "rule: project maximum" in said and "at most 3 a100 GPUs" in said, said
    slurm.cancel_all()


# --- The Slurm truth checks, every sync and guard tick run by the worker container ----------

TRUTH_PROJECT = f"{PROJECT}-truth"  # a compose project of its own: the stack's destroy spares it
TRUTH_WORKER = f"{TRUTH_PROJECT}-worker"
CONTAINER_CONF = "/etc/slurm/slurm.conf"  # where docker-compose.yml mounts the cluster's file


def _podman(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@dataclass
class WorkerContainer:
    """The compose file's worker service, run once (``compose run``) against the tests'
    database and broker."""

    name: str

    def logs(self) -> str:
        done = _podman("logs", self.name)
        return done.stdout + done.stderr

    def succeeded(self, task: str) -> int:
        """How many runs of ``task`` this container's worker finished."""
        return len(re.findall(rf"Task {re.escape(task)}\[[\w-]+\] succeeded", self.logs()))


def _worker_ready(name: str) -> None:
    """The service's own health check (a ping through the broker), until it passes."""
    deadline = time.monotonic() + 300
    ping = "celery -A governance inspect ping --timeout 10 -d celery@$(hostname)"
    while _podman("exec", name, "sh", "-c", ping).returncode != 0:
        running = _podman("inspect", "--format", "{{.State.Running}}", name).stdout.strip()
        if running != "true" or time.monotonic() > deadline:
            pytest.fail(f"the worker container is not healthy:\n{WorkerContainer(name).logs()}")
        time.sleep(3)


@pytest.fixture(scope="module")
def worker_container(django_db_setup) -> Iterator[WorkerContainer]:
    image = os.environ.get("ARBITER_CONTAINER_IMAGE", "")
    require_service(
        "the worker container",
        bool(image) and shutil.which("podman") is not None,
        "set ARBITER_CONTAINER_IMAGE (deploy/containers/stack.sh build) and install podman",
    )
    url = _test_database_url()
    broker = app.conf.broker_url or ""
    require_service(
        "the tests' PostgreSQL and Redis broker for the worker container",
        url.startswith("postgres") and broker.startswith("redis://"),
        "set DATABASE_URL=postgres://... and CELERY_BROKER_URL=redis://...",
    )
    conf = slurm_conf()
    ok, why = _slurm_answers(conf)
    require_service("Slurm", ok, why)
    _client_files(conf)
    app.control.purge()  # tasks earlier tests left on the broker are not this worker's
    _podman("rm", "-f", TRUTH_WORKER)
    _stack(
        "compose", "run", "-d", "--no-deps", "--name", TRUTH_WORKER,
        "-e", f"DATABASE_URL={url}", "-e", f"CELERY_BROKER_URL={broker}", "worker",
        project=TRUTH_PROJECT,
    )  # fmt: skip
    try:
        _worker_ready(TRUTH_WORKER)
        who = _podman("exec", TRUTH_WORKER, "sh", "-c", "id -u; id -un").stdout.split()
        with tempfile.TemporaryDirectory(prefix="arbiter-slurm-") as workdir:
            _slurm_admin(Slurm(conf=conf, workdir=workdir), int(who[0]), who[1])
        yield WorkerContainer(TRUTH_WORKER)
    finally:
        if not os.environ.get("ARBITER_STACK_KEEP"):
            _podman("rm", "-f", TRUTH_WORKER)


@dataclass
class ContainerDelivery(Delivery):
    """The agent's delivery (``Delivery`` with mode "agent"), with the sync and the guard
    sent to the worker container as Celery tasks instead of run here."""

    worker: WorkerContainer | None = None
    seconds: list[float] | None = None

    def sync(self) -> SyncRun:
        assert self.worker is not None
        self.table.unlink(missing_ok=True)
        before = self.worker.succeeded("queues.tasks.sync_cluster")
        started = time.monotonic()
        with transaction.atomic():  # queued when this commits
            run = services.sync_enqueue(
                cluster=self.lab.cluster, trigger=SyncTrigger.MANUAL, user=self.lab.ops
            )
        deadline = started + 300
        while True:
            run.refresh_from_db()
            if run.is_finished:
                break
            assert time.monotonic() < deadline, (run.status, self.worker.logs()[-3000:])
            time.sleep(0.5)
        if self.seconds is not None:
            self.seconds.append(time.monotonic() - started)
        assert run.status == SyncStatus.SUCCEEDED, run.error
        assert self.worker.succeeded("queues.tasks.sync_cluster") > before, "not the container"
        assert not self.table.exists(), "the sync wrote the table the agent delivers"
        self.fetch()
        return run

    def guard(self) -> None:
        """``queues.tasks.guard_clusters`` (beat's minute) run by the worker container."""
        held = guard_clusters.delay().get(timeout=120)  # {cluster: jobs held this tick}
        assert self.lab.cluster.name in held, held


@pytest.fixture
def container_delivery(lab: Lab, slurm, live_server, worker_container) -> ContainerDelivery:
    """The lab cluster, pulled, with ``SLURM_CONF`` the container's path; the agent fetches
    its table from the live server (the tests' database)."""
    agent = delivery_for("agent", lab, slurm, live_server.url)
    services.cluster_update(
        cluster=lab.cluster, user=lab.ops, reason=REASON, data={"slurm_conf": CONTAINER_CONF}
    )
    lab.cluster.refresh_from_db()
    assert not Path(CONTAINER_CONF).exists(), "this host has a slurm.conf at the container's path"
    return ContainerDelivery(
        mode=agent.mode,
        lab=lab,
        slurm=slurm,
        url=agent.url,
        token=agent.token,
        worker=worker_container,
        seconds=[],
    )


def _report(delivery: ContainerDelivery, started: float) -> None:
    syncs = ", ".join(f"{s:.1f}" for s in delivery.seconds or [])
    print(f"syncs by the worker container: {syncs} s; check: {time.monotonic() - started:.0f} s")


@pytest.mark.django_db(transaction=True)
def test_truth_rewrite_and_refusal_at_submit_with_the_container_sync(
    lab, slurm, container_delivery, settings
):
    started = time.monotonic()
    check = submit_truth.test_the_plugin_rewrites_an_untyped_request_and_refuses_with_the_rule_quota_and_remedy  # noqa: E501
    check(lab, slurm, container_delivery, settings)
    _report(container_delivery, started)


@pytest.mark.django_db(transaction=True)
def test_truth_strict_sampling_of_every_qos_and_request_form_with_the_container_sync(
    lab, slurm, container_delivery
):
    started = time.monotonic()
    check = submit_truth.test_no_project_ever_runs_more_gpus_than_its_rules_allow_in_any_qos_or_request_form  # noqa: E501
    check(lab, slurm, container_delivery)
    _report(container_delivery, started)


@pytest.mark.django_db(transaction=True)
def test_truth_tier_cap_with_the_container_sync_and_guard(lab, slurm, container_delivery):
    started = time.monotonic()
    tier_cap_truth.test_two_classes_in_one_capped_tier_never_hold_more_than_the_cap(
        lab, slurm, container_delivery
    )
    _report(container_delivery, started)
