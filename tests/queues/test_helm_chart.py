"""The Helm chart of deploy/helm/arbiter: rendered by the real ``helm`` (built from its Go
module by ``deploy/k8s/build.sh helm``), every object accepted by the lab's API server in a
server-side dry run, and the Kueue sync run with the chart's ServiceAccount: it succeeds, may
read no Secret or Pod, and a ClusterRole lacking one verb fails the sync naming that verb and
resource. The whole sync and truth files also run with that ServiceAccount's token under
``ARBITER_K8S_SYNC_AS=chart`` (.ci/run does).
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from queues import services
from queues.models import SyncStatus
from queues.services.kueue import KubeClient, KueueBackend
from tests.conftest import require_service
from tests.queues import kube_chart

pytestmark = pytest.mark.k8s
R = kube_chart.RELEASE

EVERY_TEMPLATE = (
    "--set",
    "ingress.enabled=true",
    "--set",
    "ingress.tlsSecret=arbiter-tls",
    "--set",
    "networkPolicy.egressTo[0].ipBlock.cidr=10.0.0.0/8",
    "--set",
    "networkPolicy.webFrom[0].namespaceSelector.matchLabels.ingress=yes",
)


@pytest.fixture(scope="module")
def helm() -> str:
    binary, why = kube_chart.helm_binary()
    require_service("helm", bool(binary), why)
    return binary


def by_kind(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_the_chart_renders_web_worker_beat_migration_and_least_privilege(helm):
    objects = by_kind(kube_chart.render(helm, *EVERY_TEMPLATE))
    web = objects[("Deployment", f"{R}-web")]
    assert web["spec"]["replicas"] == 2
    container = web["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    beat = objects[("Deployment", f"{R}-beat")]
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}
    assert beat["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    assert ("Deployment", f"{R}-worker") in objects
    job = objects[("Job", f"{R}-migrate")]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert job["spec"]["template"]["spec"]["containers"][0]["command"][-2:] == [
        "migrate",
        "--noinput",
    ]
    assert {("Service", R), ("Ingress", R)} <= set(objects)
    assert {k for k, _n in objects} >= {"NetworkPolicy", "ServiceAccount", "ClusterRole"}
    # Secrets by reference only: none rendered, each key read from the site's Secret.
    assert "Secret" not in {k for k, _n in objects}
    env = {e["name"]: e for e in container["env"]}
    for name in ("DJANGO_SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL"):
        assert env[name]["valueFrom"]["secretKeyRef"] == {"name": kube_chart.SECRET, "key": name}
    role = objects[("ClusterRole", f"{R}-kueue-sync")]
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert not resources & {"secrets", "pods", "*"}, resources
    assert not {v for rule in role["rules"] for v in rule["verbs"]} & {"*", "escalate", "bind"}


def test_helm_lint_passes(helm, tmp_path):
    done = subprocess.run(
        [helm, "lint", str(kube_chart.CHART), "--set", "existingSecret=x", *EVERY_TEMPLATE],
        env={**os.environ, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


def test_the_chart_refuses_to_render_without_an_existing_secret(helm):
    with pytest.raises(AssertionError, match="Set existingSecret"):
        kube_chart.render(helm, "--set", "existingSecret=")


def test_the_api_server_accepts_every_object_of_the_chart(helm, kube_server, tmp_path):
    """Server-side dry run (``dryRun=All``) of every rendered object, the migration hook
    Job, Ingress and both NetworkPolicies included: schema, defaults and admission pass."""
    objects = kube_chart.render(helm, *EVERY_TEMPLATE)
    client = KubeClient(kube_server.connection(tmp_path))
    kube_chart.namespace_ensure(client)
    accepted = []
    for obj in objects:
        status, body = kube_chart.apply(client, obj, dry_run=True)
        assert status in (200, 201), (obj["kind"], obj["metadata"]["name"], body)
        accepted.append(obj["kind"])
    client.close()
    assert sorted(accepted) == sorted(
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "Deployment",
            "Deployment",
            "Ingress",
            "Job",
            "NetworkPolicy",
            "NetworkPolicy",
            "Service",
            "ServiceAccount",
        ]
    )


@pytest.fixture
def chart_token(helm, kube, tmp_path) -> str:
    client = KubeClient(kube.connection(tmp_path))
    token = kube_chart.service_account_token(client, helm)
    client.close()
    return token


def test_the_sync_runs_as_the_charts_service_account_which_reads_no_secret_or_pod(
    org, kube, tmp_path, chart_token
):
    org.project("vision")
    org.project("nlp", guarantee=2, borrow=0)
    connection = kube.connection(tmp_path, token=chart_token)
    run = services.sync_now(
        cluster=org.cluster, user=org.ops, backend=KueueBackend(connection=connection)
    )
    assert run.status == SyncStatus.SUCCEEDED, run.error
    assert run.result["writes"] > 0
    again = services.sync_now(
        cluster=org.cluster, user=org.ops, backend=KueueBackend(connection=connection)
    )
    assert again.status == SyncStatus.SUCCEEDED, again.error
    assert again.result["writes"] == 0
    state = services.drift_check(cluster=org.cluster, backend=KueueBackend(connection=connection))
    assert state.drift_error == ""
    client = KubeClient(connection)
    own = f"/api/v1/namespaces/{kube_chart.NAMESPACE}"
    for path in ("/api/v1/secrets", "/api/v1/pods", f"{own}/secrets", f"{own}/pods"):
        with pytest.raises(services.SchedulerError, match="lacks a permission"):
            client.request("GET", path)
    client.close()


def _without(rules: list[dict[str, Any]], resource: str, verb: str) -> list[dict[str, Any]]:
    """The chart's rules less ``verb`` on ``resource`` (its rule split in two)."""
    out = []
    for rule in rules:
        if resource not in rule["resources"]:
            out.append(rule)
            continue
        if others := [r for r in rule["resources"] if r != resource]:
            out.append({**rule, "resources": others})
        if verbs := [v for v in rule["verbs"] if v != verb]:
            out.append({**rule, "resources": [resource], "verbs": verbs})
    return out


@pytest.fixture
def lacking(helm, kube, tmp_path) -> Iterator[Callable[[str, str], str]]:
    """A token of a second account whose ClusterRole is the chart's less one verb on one
    resource: ``lacking(resource, verb)``."""
    client = KubeClient(kube.connection(tmp_path))
    made: list[dict[str, Any]] = []

    def make(resource: str, verb: str) -> str:
        for obj in copy.deepcopy(kube_chart.chart_rbac(helm)):
            obj["metadata"]["name"] = "arbiter-lacking"
            if obj["kind"] == "ClusterRole":
                obj["rules"] = _without(obj["rules"], resource, verb)
            if obj["kind"] == "ClusterRoleBinding":
                obj["roleRef"]["name"] = "arbiter-lacking"
                obj["subjects"][0]["name"] = "arbiter-lacking"
            made.append(obj)
        kube_chart.install_rbac(client, made)
        return kube_chart.mint_token(client, "arbiter-lacking")

    yield make
    for obj in made:
        client.request("DELETE", kube_chart.object_path(obj))
    client.close()


def test_a_sync_lacking_a_permission_names_the_verb_and_the_resource(org, kube, tmp_path, lacking):
    org.project("vision")
    connection = kube.connection(tmp_path, token=lacking("resourceflavors", "patch"))
    run = services.sync_now(
        cluster=org.cluster, user=org.ops, backend=KueueBackend(connection=connection)
    )
    assert run.status == SyncStatus.FAILED
    assert "lacks a permission: it may not patch resourceflavors.kueue.x-k8s.io" in run.error
    assert "system:serviceaccount:arbiter-system:arbiter-lacking" in run.error


def test_a_drift_check_lacking_a_permission_names_it(org, kube, tmp_path, lacking):
    """The Jobs a drift check lists (to warn about one waiting in an ungoverned namespace):
    without ``list`` on them the check says so instead of staying silent."""
    org.project("vision")
    assert (
        services.sync_now(
            cluster=org.cluster,
            user=org.ops,
            backend=KueueBackend(connection=kube.sync_connection(tmp_path)),
        ).status
        == SyncStatus.SUCCEEDED
    )
    connection = kube.connection(tmp_path, token=lacking("jobs", "list"))
    state = services.drift_check(cluster=org.cluster, backend=KueueBackend(connection=connection))
    assert "it may not list jobs.batch" in state.drift_error
    assert state.drift == []


# --- The README's commands ("On Kubernetes (Helm)"), as written, against the lab ---------

README_NAMESPACE = "arbiter"


def readme_helm_blocks() -> list[str]:
    text = (Path(settings.BASE_DIR) / "README.md").read_text()
    section = text.split("### On Kubernetes (Helm)", 1)[1].split("\n#", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)


def _readme_release_removed(client: KubeClient, env: dict[str, str]) -> None:
    """What an earlier run left: the release, the Secret and the namespace (no namespace
    controller runs in the lab: emptied by hand, then finalized)."""
    subprocess.run(
        ["helm", "uninstall", "arbiter", "--namespace", README_NAMESPACE],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    ns = f"/api/v1/namespaces/{README_NAMESPACE}"
    status, _body = client.request("GET", ns)
    if status == 404:
        return
    client.request("DELETE", ns)  # Terminating: nothing new is made in it from now on
    for collection in (
        f"{ns}/secrets",
        f"/apis/batch/v1/namespaces/{README_NAMESPACE}/jobs",
        f"/apis/apps/v1/namespaces/{README_NAMESPACE}/replicasets",
        f"{ns}/pods",  # Pending for good (no kubelet)
    ):
        _status, body = client.request("GET", collection)
        for item in body.get("items") or []:
            client.request("DELETE", f"{collection}/{item['metadata']['name']}")
    _status, body = client.request("GET", ns)
    if body.get("metadata"):
        body["spec"] = {"finalizers": []}
        client.request("PUT", f"{ns}/finalize", body=body)
    deadline = time.monotonic() + 60
    while client.request("GET", ns)[0] != 404:
        assert time.monotonic() < deadline, "the namespace arbiter does not go away"
        time.sleep(0.5)


def _migration_completes(client: KubeClient, stop: threading.Event) -> None:
    """The kubelet's part, which the lab lacks: the migration hook Job, once Helm made it,
    is marked as succeeded (Helm waits for it, then starts the release's pods)."""
    path = f"/apis/batch/v1/namespaces/{README_NAMESPACE}/jobs/arbiter-migrate"
    while not stop.is_set():
        status, job = client.request("GET", path)
        state = (job.get("status") or {}) if status == 200 else {}
        if status == 200 and not any(
            c["type"] == "Complete" for c in state.get("conditions") or []
        ):
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            done = [
                {"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now}
                for kind in ("SuccessCriteriaMet", "Complete")
            ]
            started = state.get("startTime") or now
            patch = {
                "status": {
                    "startTime": started,
                    "completionTime": now,
                    "succeeded": 1,
                    "active": 0,
                    "ready": 0,
                    "conditions": done,
                }
            }
            client.request(
                "PATCH",
                f"{path}/status",
                body=patch,
                content_type="application/merge-patch+json",
            )
        stop.wait(0.5)


def _run_with_migration(block: str, env: dict[str, str], client: KubeClient) -> str:
    stop = threading.Event()
    helper = threading.Thread(target=_migration_completes, args=(client, stop), daemon=True)
    helper.start()
    try:
        done = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", block],
            env=env,
            cwd=settings.BASE_DIR,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        stop.set()
        helper.join()
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def test_the_readmes_helm_install_and_upgrade_run_on_the_lab(helm, kube_server, tmp_path):
    kubectl, why = kube_chart.kubectl_binary()
    require_service("kubectl", bool(kubectl), why)
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "helm").symlink_to(helm)
    (tools / "kubectl").symlink_to(kubectl)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kube_chart.kubeconfig(kube_server))
    env = {
        **os.environ,
        "PATH": f"{tools}:{os.environ['PATH']}",
        "KUBECONFIG": str(kubeconfig),
        "HOME": str(tmp_path),
    }
    client = KubeClient(kube_server.connection(tmp_path))
    _readme_release_removed(client, env)
    install, upgrade = readme_helm_blocks()
    try:
        _run_with_migration(install, env, client)
        apps = f"/apis/apps/v1/namespaces/{README_NAMESPACE}/deployments"
        _status, body = client.request("GET", apps)
        replicas = {d["metadata"]["name"]: d["spec"]["replicas"] for d in body["items"]}
        assert replicas == {"arbiter-web": 2, "arbiter-worker": 1, "arbiter-beat": 1}
        web = next(d for d in body["items"] if d["metadata"]["name"] == "arbiter-web")
        assert web["spec"]["template"]["spec"]["containers"][0]["image"] == (
            "registry.example.com/arbiter:1.0"
        )
        ingress = f"/apis/networking.k8s.io/v1/namespaces/{README_NAMESPACE}/ingresses/arbiter"
        assert client.request("GET", ingress)[0] == 200
        role = "/apis/rbac.authorization.k8s.io/v1/clusterroles/arbiter-kueue-sync"
        assert client.request("GET", role)[0] == 200

        _run_with_migration(upgrade, env, client)
        _status, body = client.request("GET", f"{apps}/arbiter-web")
        assert body["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":1.1")
        env_names = {e["name"] for e in body["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert {"DJANGO_SECRET_KEY", "ARBITER_SITE_URL"} <= env_names  # --reuse-values
    finally:
        _readme_release_removed(client, env)
        client.close()
