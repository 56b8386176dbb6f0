"""A real Slurm for the sync tests: the single-host cluster of ``deploy/slurm/up.sh``.

``SLURM_CONF`` comes from the environment or from ``var/slurm/env`` (written by up.sh).
Tests that need Slurm skip with a message when none answers, and fail under ``CI=true``.
Every test starts and ends with no job in the cluster; whatever Arbiter-managed objects an
earlier test left are removed by the first sync (they are not in the desired state).
"""

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from governance import services as rules
from governance.models import (
    GpuFlavor,
    Pool,
    PreemptionClass,
    PriorityTier,
    Project,
    ProjectRole,
    Quota,
    User,
)
from queues import services
from queues.models import Cluster, SubmitTableDelivery, SyncRun, SyncStatus
from queues.services import SchedulerError
from queues.services.kueue import KubeClient, KueueConnection
from queues.services.kueue.schema import SHIPPED_CRDS, load_crds
from queues.services.slurm.submit import TABLE_NAME
from tests.conftest import REASON, require_service
from tests.queues import kube_chart
from tests.queues.pull_agent import agent_token, run_agent

SLURM_CLUSTER = "arbiter"


def slurm_conf() -> str:
    if os.environ.get("SLURM_CONF"):
        return os.environ["SLURM_CONF"]
    env_file = Path(settings.BASE_DIR) / "var" / "slurm" / "env"
    if env_file.exists():
        for line in env_file.read_text().splitlines():
            key, _sep, value = line.partition("=")
            if key == "SLURM_CONF":
                return value.strip()
    return ""


def _slurm_answers(conf: str) -> tuple[bool, str]:
    if not shutil.which("sacctmgr"):
        return False, "sacctmgr is not installed (run deploy/slurm/up.sh as root)"
    if not conf or not Path(conf).exists():
        return False, "no SLURM_CONF (start the lab with deploy/slurm/up.sh)"
    env = {**os.environ, "SLURM_CONF": conf}
    try:
        done = subprocess.run(
            ["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"],
            capture_output=True,
            text=True,
            env=env,
            timeout=15,
            check=False,
        )
        ping = subprocess.run(
            ["scontrol", "ping"], capture_output=True, text=True, env=env, timeout=15, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return False, str(error)
    if done.returncode != 0 or SLURM_CLUSTER not in done.stdout.split():
        return False, f"slurmdbd does not answer: {done.stdout}{done.stderr}".strip()
    if "UP" not in ping.stdout:
        return False, f"slurmctld is not up: {ping.stdout}{ping.stderr}".strip()
    return True, ""


@dataclass
class Slurm:
    """Submit jobs and read their state on the lab cluster."""

    conf: str
    workdir: str
    jobs: list[str] = field(default_factory=list)

    def run(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            env={**os.environ, "SLURM_CONF": self.conf},
            cwd=self.workdir,
            timeout=60,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def sbatch(
        self, *options: str, account: str, qos: str, gpus: int | str, seconds: int = 300
    ) -> str:
        """``gpus``: a count, or ``type:count`` (``h100:1``)."""
        job = self.run(
            "sbatch",
            *options,
            "--parsable",
            "-o",
            "/dev/null",
            "-A",
            account,
            "-q",
            qos,
            f"--gres=gpu:{gpus}",
            "--wrap",
            f"sleep {seconds}",
        ).strip()
        self.jobs.append(job)
        return job

    def job(self, job_id: str) -> dict[str, str]:
        """State, reason, QOS and restart count of one job (``squeue -t all``)."""
        out = self.run("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T|%r|%q", check=False)
        state, reason, qos = ([*(out.strip().splitlines() or ["||"])[0].split("|"), "", ""])[:3]
        restarts = self.run("scontrol", "show", "job", job_id, check=False)
        count = next((w.split("=")[1] for w in restarts.split() if w.startswith("Restarts=")), "0")
        return {"state": state, "reason": reason, "qos": qos, "restarts": count}

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.3)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")

    def wait_state(self, job_id: str, state: str, timeout: float = 30.0) -> dict[str, str]:
        self.wait_for(f"job {job_id} {state}", lambda: self.job(job_id)["state"] == state, timeout)
        return self.job(job_id)

    def cancel_all(self) -> None:
        self.run("scancel", "--full", "-u", "root", check=False)
        self.wait_for(
            "the queue to empty",
            lambda: not self.run("squeue", "-h", "-o", "%i", check=False).strip(),
            timeout=30,
        )

    def sacctmgr(self, *args: str) -> str:
        return self.run("sacctmgr", *args)

    def remove_arbiter_objects(self) -> None:
        """Start from a cluster without Arbiter's accounts and QOS (hand-made ones stay)."""
        accounts = self.sacctmgr("-n", "-P", "show", "account", "format=account,organization")
        ours = [row.split("|")[0] for row in accounts.splitlines() if row.endswith("|arbiter")]
        # Deepest first: project accounts hold dots, pools do not, the root one is "arbiter".
        for level in (2, 1, 0):
            names = [n for n in ours if _depth(n) == level]
            if names:
                self.sacctmgr("-i", "delete", "account", "where", f"name={','.join(names)}")
        qos = self.sacctmgr("-n", "-P", "show", "qos", "format=name,description")
        ours = [row.split("|")[0] for row in qos.splitlines() if "|arbiter:" in row]
        if ours:
            self.sacctmgr("-i", "delete", "qos", "where", f"name={','.join(ours)}")


def _depth(account: str) -> int:
    return 0 if account == "arbiter" else 1 + account.count(".")


@pytest.fixture
def slurm() -> Iterator[Slurm]:
    conf = slurm_conf()
    ok, why = _slurm_answers(conf)
    require_service("Slurm", ok, why)
    with tempfile.TemporaryDirectory(prefix="arbiter-slurm-") as workdir:
        lab = Slurm(conf=conf, workdir=workdir)
        lab.cancel_all()
        lab.remove_arbiter_objects()
        yield lab
        lab.cancel_all()


@dataclass
class Lab:
    """Rules sized for the lab's one node (4 A100 + 4 H100), built through the services."""

    ops: User
    root: User
    a100: GpuFlavor
    h100: GpuFlavor
    pool: Pool
    exploratory: PriorityTier
    regular: PriorityTier
    key: PriorityTier
    production: PriorityTier
    allowed: PreemptionClass
    forbidden: PreemptionClass
    cluster: Cluster

    def project(
        self,
        slug: str,
        *,
        tier: PriorityTier | None = None,
        guarantee: int = 0,
        borrow: int | None = 0,
        preemption_class: PreemptionClass | None = None,
        flavor: GpuFlavor | None = None,
    ) -> tuple[Project, Quota]:
        kw: dict[str, Any] = {"user": self.ops, "reason": REASON}
        project = rules.project_create(**kw, slug=slug, name=slug.title(), tier=tier)
        rules.membership_set(**kw, project=project, member=self.root, role=ProjectRole.LEAD)
        quota = rules.quota_create(
            **kw,
            project=project,
            pool=self.pool,
            flavor=flavor or self.a100,
            guarantee=guarantee,
            borrow_limit=borrow,
            preemption_class=preemption_class or self.allowed,
        )
        return project, quota

    def account(self, project: Project) -> str:
        return f"{self.pool.slug}.{project.slug}"


@pytest.fixture
def lab(ops, slurm) -> Lab:
    kw: dict[str, Any] = {"user": ops, "reason": REASON}
    # Jobs run as root (the lab's only submitter), so root is the projects' member.
    root = User.objects.create_user(username="root", password=None)
    a100 = rules.flavor_create(
        **kw, slug="a100", name="A100", gpu_model="A100", memory_gb=80, gres_type="a100"
    )
    h100 = rules.flavor_create(
        **kw, slug="h100", name="H100", gpu_model="H100", memory_gb=80, gres_type="h100"
    )
    pool = rules.pool_create(**kw, slug="lab", name="Lab")
    rules.pool_capacity_set(**kw, pool=pool, flavor=a100, gpus=4)
    rules.pool_capacity_set(**kw, pool=pool, flavor=h100, gpus=4)
    common: dict[str, Any] = {
        "eligibility": "Any",
        "confirmed_by": "Ops",
        "review_cycle_days": 90,
        "owner": ops,
    }
    exploratory = rules.tier_create(
        **kw, **common, slug="exploratory", name="Exploratory", score=10, scheduler_value=100
    )
    regular = rules.tier_create(
        **kw,
        **common,
        slug="regular",
        name="Regular",
        score=40,
        scheduler_value=400,
        is_default=True,
    )
    key = rules.tier_create(**kw, **common, slug="key", name="Key", score=70, scheduler_value=700)
    production = rules.tier_create(
        **kw,
        **common,
        slug="production",
        name="Production",
        score=95,
        scheduler_value=950,
        may_preempt=True,
        preemptible_tiers=[regular, exploratory],
    )
    allowed = rules.preemption_class_create(
        **kw, slug="allowed", name="Allowed", kind="allowed", business_impact="Restartable."
    )
    forbidden = rules.preemption_class_create(
        **kw, slug="forbidden", name="Forbidden", kind="forbidden", business_impact="Serving."
    )
    cluster = services.cluster_create(
        **kw, name="lab", slurm_cluster=SLURM_CLUSTER, slurm_conf=slurm.conf, pools=[pool]
    )
    return Lab(
        ops=ops,
        root=root,
        a100=a100,
        h100=h100,
        pool=pool,
        exploratory=exploratory,
        regular=regular,
        key=key,
        production=production,
        allowed=allowed,
        forbidden=forbidden,
        cluster=cluster,
    )


# --- Kubernetes / Kueue ---------------------------------------------------------------------


# How the job_submit table reaches slurmctld: "write" (the sync writes it beside slurm.conf)
# or "agent" (no shared file system: the cluster's table is pulled, the sync writes nothing,
# and the real pull agent fetches it over HTTP from a live Arbiter and renames it in place).
DELIVERIES = ["write", "agent"]


@dataclass
class Delivery:
    """Sync the lab cluster and get its table to slurmctld the way ``mode`` says."""

    mode: str
    lab: Lab
    slurm: Slurm
    url: str = ""
    token: str = ""

    @property
    def table(self) -> Path:
        return Path(self.slurm.conf).parent / TABLE_NAME

    def sync(self) -> SyncRun:
        """A sync; with the agent, the table is removed first and only the agent puts one
        back (the sync writing one fails the test)."""
        if self.mode == "agent":
            self.table.unlink(missing_ok=True)
        run = services.sync_now(cluster=self.lab.cluster, user=self.lab.ops)
        assert run.status == SyncStatus.SUCCEEDED, run.error
        if self.mode == "agent":
            assert not self.table.exists(), "the sync wrote the table the agent delivers"
            self.fetch()
        return run

    def fetch(self, url: str = "") -> subprocess.CompletedProcess | None:
        """One run of the agent (with the agent; else nothing): it must succeed unless
        ``url`` (another address for Arbiter) is given."""
        if self.mode != "agent":
            return None
        done = run_agent(
            url or self.url,
            self.lab.cluster,
            self.table.parent,
            self.token,
            token_file=Path(self.slurm.workdir) / "agent.token",
        )
        if not url:
            assert done.returncode == 0, done.stderr
        return done

    def guard(self) -> None:
        """The guard's minute on the lab cluster (beat's ``queues.tasks.guard_clusters``)."""
        services.guard_check(cluster=self.lab.cluster)

    def status(self, run: SyncRun) -> dict[str, Any]:
        """The plugin's status after ``run``: as the sync saw it, or (with the agent) as
        Arbiter knows it from the agent's fetch since."""
        if self.mode == "write":
            return run.result["submit_plugin"]
        return services.submit_refresh(
            cluster=self.lab.cluster,
            backend=services.backend_for(self.lab.cluster),
            write=False,
            recheck=False,
        )


def delivery_for(mode: str, lab: Lab, slurm: Slurm, url: str) -> Delivery:
    if mode == "write":
        return Delivery(mode=mode, lab=lab, slurm=slurm)
    services.cluster_update(
        cluster=lab.cluster,
        user=lab.ops,
        reason=REASON,
        data={"submit_table_delivery": SubmitTableDelivery.PULL},
    )
    lab.cluster.refresh_from_db()
    token = agent_token(lab.cluster, lab.ops)
    return Delivery(mode=mode, lab=lab, slurm=slurm, url=url, token=token)


@pytest.fixture(params=DELIVERIES)
def delivery(request, lab, slurm, live_server) -> Delivery:
    """The lab cluster with its table written by the sync, then (second run) delivered by
    the pull agent only. Transactional (the live server reads what the test commits)."""
    return delivery_for(request.param, lab, slurm, live_server.url)


def kube_env() -> dict[str, str]:
    """Connection of the API server of ``deploy/k8s/up.sh``: the environment, else its env file."""
    found = {
        k: os.environ[k]
        for k in ("KUBE_API_SERVER", "KUBE_CA_FILE", "KUBE_TOKEN_FILE")
        if k in os.environ
    }
    env_file = (
        Path(os.environ.get("ARBITER_K8S_DIR", Path(settings.BASE_DIR) / "var" / "k8s")) / "env"
    )
    if len(found) < 3 and env_file.exists():
        for line in env_file.read_text().splitlines():
            key, _sep, value = line.partition("=")
            found.setdefault(key, value.strip())
    return found


@dataclass
class KubeServer:
    api_server: str
    ca_bundle: str
    token: str
    # The token syncs use: the chart's ServiceAccount's under ARBITER_K8S_SYNC_AS=chart
    # (tests/queues/kube_chart.py), else the administrator's.
    sync_token: str = ""

    def connection(
        self, directory: Path, namespace_template: str = "{project}", *, token: str = ""
    ) -> KueueConnection:
        """The administrator's connection (the tests' own calls)."""
        token_file = directory / ("sync-token" if token else "token")
        token_file.write_text((token or self.token) + "\n")
        return KueueConnection(
            api_server=self.api_server,
            ca_bundle=self.ca_bundle,
            credentials_path=str(token_file),
            namespace_template=namespace_template,
        )

    def sync_connection(
        self, directory: Path, namespace_template: str = "{project}"
    ) -> KueueConnection:
        """The connection a sync uses (see ``sync_token``)."""
        return self.connection(directory, namespace_template, token=self.sync_as)

    @property
    def sync_as(self) -> str:
        return self.sync_token or self.token


def _kube_answers(env: dict[str, str]) -> tuple[bool, str]:
    if not env.get("KUBE_API_SERVER"):
        return False, "no API server (start it with deploy/k8s/up.sh as root)"
    try:
        server = KubeServer(
            env["KUBE_API_SERVER"],
            Path(env["KUBE_CA_FILE"]).read_text(),
            Path(env["KUBE_TOKEN_FILE"]).read_text().strip(),
        )
    except (KeyError, OSError) as error:
        return False, f"cannot read the connection files: {error}"
    with tempfile.TemporaryDirectory() as tmp:
        client = KubeClient(server.connection(Path(tmp)))
        try:
            status, _body = client.request("GET", "/version")
        except SchedulerError as error:
            return False, str(error)
        finally:
            client.close()
    if status != 200:
        return False, f"/version answered {status}"
    return True, ""


@pytest.fixture(scope="session")
def kube_server() -> Iterator[KubeServer]:
    """The real API server of ``deploy/k8s/up.sh`` with Kueue running and the shipped CRDs
    installed as they are (CEL rules included; the same files Kueue's module installed)."""
    env = kube_env()
    ok, why = _kube_answers(env)
    require_service("Kubernetes API server", ok, why)
    server = KubeServer(
        env["KUBE_API_SERVER"],
        Path(env["KUBE_CA_FILE"]).read_text(),
        Path(env["KUBE_TOKEN_FILE"]).read_text().strip(),
    )
    with tempfile.TemporaryDirectory() as tmp:
        client = KubeClient(server.connection(Path(tmp)))
        for crd in load_crds(SHIPPED_CRDS).values():
            client.ensure_crd(crd)
        deadline = time.monotonic() + 60
        for kind in (
            "ResourceFlavor",
            "Cohort",
            "ClusterQueue",
            "LocalQueue",
            "WorkloadPriorityClass",
        ):
            while True:
                try:
                    client.list(kind)
                    break
                except SchedulerError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        if os.environ.get("ARBITER_K8S_SYNC_AS", "") == "chart":
            server.sync_token = _chart_token(client)
        client.close()
    yield server


def _chart_token(client: KubeClient) -> str:
    """A token of the Helm chart's ServiceAccount, its ClusterRole installed."""
    helm, why = kube_chart.helm_binary()
    require_service("helm", bool(helm), why)
    return kube_chart.service_account_token(client, helm)


@pytest.fixture
def kube(kube_server, tmp_path, settings) -> KubeServer:
    """The server without the objects earlier tests left (namespaces stay: Arbiter never
    deletes them, and without a controller manager a deleted one never goes away)."""
    settings.ARBITER_KUBE_CREDENTIALS_DIR = str(tmp_path)
    client = KubeClient(kube_server.connection(tmp_path))
    _jobs_and_workloads_delete(client)
    for kind in (
        "LocalQueue",
        "ClusterQueue",
        "Cohort",
        "ResourceFlavor",
        "WorkloadPriorityClass",
        "PriorityClass",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
    ):
        if not client.serves(kind):
            continue
        for item in client.list(kind):
            meta = item["metadata"]
            if kind == "PriorityClass" and meta["name"].startswith("system-"):
                continue
            key = f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]
            client.delete(kind, key)
    # Kueue lets a queue or flavor go only once nothing uses it (finalizer resource-in-use):
    # wait until every deleted one is gone, or the next sync would meet them half-deleted.
    deadline = time.monotonic() + 120
    while any(
        item["metadata"].get("deletionTimestamp")
        for kind in ("LocalQueue", "ClusterQueue", "Cohort", "ResourceFlavor")
        for item in client.list(kind)
    ):
        if time.monotonic() > deadline:
            raise AssertionError("Kueue objects of earlier tests are still being deleted")
        # A Workload Kueue made for a Job in the moment that Job was deleted holds its queue
        # (no garbage collector runs here): delete such late ones too.
        _jobs_and_workloads_delete(client)
        time.sleep(0.5)
    client.close()
    return kube_server


def _jobs_and_workloads_delete(client: KubeClient) -> None:
    """Every Job and Workload an earlier test left, in any namespace: none may outlive its
    test, and an admitted Workload keeps its ClusterQueue and flavor from being deleted."""
    background = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    for collection in ("/apis/batch/v1/jobs", "/apis/kueue.x-k8s.io/v1beta2/workloads"):
        status, body = client.request("GET", collection)
        if status != 200:
            continue
        group, _sep, plural = collection.rpartition("/")
        for item in body.get("items") or []:
            meta = item["metadata"]
            path = f"{group}/namespaces/{meta['namespace']}/{plural}/{meta['name']}"
            client.request("DELETE", path, body=background)


@dataclass
class Org:
    """Two pools (one nested), two flavors, four tiers, two classes: built through the services."""

    ops: User
    a100: GpuFlavor
    h100: GpuFlavor
    pool: Pool
    child: Pool
    regular: PriorityTier
    production: PriorityTier
    allowed: PreemptionClass
    forbidden: PreemptionClass
    cluster: Cluster

    def project(
        self,
        slug: str,
        *,
        tier: PriorityTier | None = None,
        guarantee: int = 4,
        borrow: int | None = 2,
        lending: int | None = None,
        preemption_class: PreemptionClass | None = None,
        flavor: GpuFlavor | None = None,
        pool: Pool | None = None,
    ) -> tuple[Project, Quota]:
        kw: dict[str, Any] = {"user": self.ops, "reason": REASON}
        project = Project.objects.filter(slug=slug).first() or rules.project_create(
            **kw, slug=slug, name=slug.title(), tier=tier
        )
        quota = rules.quota_create(
            **kw,
            project=project,
            pool=pool or self.pool,
            flavor=flavor or self.a100,
            guarantee=guarantee,
            borrow_limit=borrow,
            lending_limit=lending,
            preemption_class=preemption_class or self.allowed,
        )
        return project, quota


@pytest.fixture
def org(ops) -> Org:
    kw: dict[str, Any] = {"user": ops, "reason": REASON}
    a100 = rules.flavor_create(
        **kw,
        slug="a100",
        name="A100",
        gpu_model="A100",
        memory_gb=80,
        node_labels={"gpu.example.com/model": "a100"},
        node_taints=[{"key": "gpu", "value": "a100", "effect": "NoSchedule"}],
    )
    h100 = rules.flavor_create(
        **kw, slug="h100", name="H100", gpu_model="H100", memory_gb=80, node_labels={"gpu": "h100"}
    )
    pool = rules.pool_create(**kw, slug="training", name="Training")
    child = rules.pool_create(**kw, slug="training_eu", name="Training EU", parent=pool)
    # The child pool's GPUs are part of its parent's.
    rules.pool_capacity_set(**kw, pool=pool, flavor=a100, gpus=64)
    rules.pool_capacity_set(**kw, pool=pool, flavor=h100, gpus=32)
    rules.pool_capacity_set(**kw, pool=child, flavor=a100, gpus=32)
    rules.pool_capacity_set(**kw, pool=child, flavor=h100, gpus=16)
    common: dict[str, Any] = {
        "eligibility": "Any",
        "confirmed_by": "Ops",
        "review_cycle_days": 90,
        "owner": ops,
    }
    exploratory = rules.tier_create(
        **kw, **common, slug="exploratory", name="Exploratory", score=10, scheduler_value=100
    )
    regular = rules.tier_create(
        **kw,
        **common,
        slug="regular",
        name="Regular",
        score=40,
        scheduler_value=400,
        is_default=True,
    )
    production = rules.tier_create(
        **kw,
        **common,
        slug="production",
        name="Production",
        score=95,
        scheduler_value=950,
        may_preempt=True,
        preemptible_tiers=[regular, exploratory],
    )
    allowed = rules.preemption_class_create(
        **kw, slug="allowed", name="Allowed", kind="allowed", business_impact="Restartable."
    )
    forbidden = rules.preemption_class_create(
        **kw, slug="forbidden", name="Forbidden", kind="forbidden", business_impact="Serving."
    )
    cluster = services.cluster_create(**kw, name="k8s", slurm_cluster="k8s", pools=[pool, child])
    return Org(
        ops=ops,
        a100=a100,
        h100=h100,
        pool=pool,
        child=child,
        regular=regular,
        production=production,
        allowed=allowed,
        forbidden=forbidden,
        cluster=cluster,
    )
