"""The Helm chart of deploy/helm/arbiter on the lab's API server: rendered with the real
``helm`` (built by ``deploy/k8s/build.sh helm`` into the cache outside the work tree), its
ServiceAccount and ClusterRole installed, and a token of that ServiceAccount minted with the
TokenRequest API, so that the Kueue sync runs with the chart's permissions and nothing more.

``ARBITER_K8S_SYNC_AS=chart`` makes the ``kube`` fixture's ``sync_connection`` (every sync
of tests/queues/test_sync_kueue.py and the truth tests) use that token; the tests' own calls
(submitting Jobs, reading Workloads, cleaning up) stay the lab administrator's.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

from queues.services.kueue import KubeClient

CHART = Path(settings.BASE_DIR) / "deploy" / "helm" / "arbiter"
HELM_VERSION = os.environ.get("ARBITER_HELM_VERSION", "v4.3.2")
KUBECTL_VERSION = os.environ.get("ARBITER_K8S_VERSION", "v1.35.4")
NAMESPACE = "arbiter-system"
# Not "arbiter": the README's install (test_helm_chart.py) is release "arbiter", and the
# cluster-wide ClusterRole of one release must not be another's.
RELEASE = "arbiter-ci"
SECRET = "arbiter-env"
# Where each kind of the chart lives on the API server (group/version, plural, namespaced).
PATHS = {
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "Service": ("/api/v1", "services", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "Job": ("/apis/batch/v1", "jobs", True),
    "Ingress": ("/apis/networking.k8s.io/v1", "ingresses", True),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
}


def _binary(name: str, version: str) -> tuple[str, str]:
    """``ARBITER_<NAME>``, else the cached build, else one on PATH; or ``("", why not)``."""
    cache = Path(os.environ.get("ARBITER_K8S_CACHE", "/var/cache/arbiter-k8s"))
    for candidate in (
        os.environ.get(f"ARBITER_{name.upper()}", ""),
        str(cache / "bin" / f"{name}-{version}"),
        shutil.which(name) or "",
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate, ""
    return "", f"no {name} binary (build it with deploy/k8s/build.sh {name}, {version})"


def helm_binary() -> tuple[str, str]:
    return _binary("helm", HELM_VERSION)


def kubectl_binary() -> tuple[str, str]:
    return _binary("kubectl", KUBECTL_VERSION)


def kubeconfig(server: Any) -> str:
    """A kubeconfig of the lab's administrator (``server``: the tests' ``KubeServer``)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "lab",
                "cluster": {
                    "server": server.api_server,
                    "certificate-authority-data": base64.b64encode(
                        server.ca_bundle.encode()
                    ).decode(),
                },
            }
        ],
        "users": [{"name": "admin", "user": {"token": server.token}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "admin"}}],
        "current-context": "lab",
    }
    return yaml.safe_dump(config)


def render(helm: str, *args: str, show_only: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """``helm template`` of the chart as release ``arbiter`` in ``arbiter-system``: its
    objects (hooks included)."""
    command = [helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    command += ["--set", f"existingSecret={SECRET}", *args]
    for template in show_only:
        command += ["--show-only", template]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise AssertionError(f"helm template failed: {done.stderr}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def object_path(obj: dict[str, Any], namespace: str = NAMESPACE) -> str:
    prefix, plural, namespaced = PATHS[obj["kind"]]
    name = obj["metadata"]["name"]
    if namespaced:
        return f"{prefix}/namespaces/{namespace}/{plural}/{name}"
    return f"{prefix}/{plural}/{name}"


def apply(client: KubeClient, obj: dict[str, Any], *, dry_run: bool = False) -> tuple[int, dict]:
    """Server-side apply of one object as the administrator (``dryRun=All`` when asked)."""
    query = [("fieldManager", "arbiter-tests"), ("force", "true")]
    if dry_run:
        query.append(("dryRun", "All"))
    return client.request(
        "PATCH",
        object_path(obj),
        query=query,
        body=obj,
        content_type="application/apply-patch+yaml",
    )


def namespace_ensure(client: KubeClient, name: str = NAMESPACE) -> None:
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    status, body = client.request(
        "PATCH",
        f"/api/v1/namespaces/{name}",
        query=[("fieldManager", "arbiter-tests")],
        body=manifest,
        content_type="application/apply-patch+yaml",
    )
    assert status in (200, 201), body


def install_rbac(client: KubeClient, objects: list[dict[str, Any]]) -> None:
    """The ServiceAccount, ClusterRole and ClusterRoleBinding among ``objects``, applied."""
    namespace_ensure(client)
    for obj in objects:
        if obj["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
            status, body = apply(client, obj)
            assert status in (200, 201), body


def mint_token(client: KubeClient, account: str, seconds: int = 7200) -> str:
    """A bearer token of ``account`` from the TokenRequest API (as the kubelet gets the
    projected one the chart mounts)."""
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }
    status, body = client.request(
        "POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}/token", body=request
    )
    assert status == 201, body
    return str(body["status"]["token"])


def chart_rbac(helm: str) -> list[dict[str, Any]]:
    return render(helm, show_only=("templates/serviceaccount.yaml", "templates/rbac.yaml"))


def service_account_token(client: KubeClient, helm: str) -> str:
    """The chart's ServiceAccount and ClusterRole installed (as the administrator), and a
    token of that ServiceAccount."""
    objects = chart_rbac(helm)
    install_rbac(client, objects)
    account = next(o for o in objects if o["kind"] == "ServiceAccount")["metadata"]["name"]
    token = mint_token(client, account)
    assert whoami(client, token) == f"system:serviceaccount:{NAMESPACE}:{account}"
    return token


def whoami(client: KubeClient, token: str) -> str:
    """The user name the API server sees for ``token`` (a SelfSubjectReview made with it)."""
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    api = client.api
    saved = api.configuration.api_key
    api.configuration.api_key = {"authorization": f"Bearer {token}"}
    try:
        status, body = client.request(
            "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=review
        )
    finally:
        api.configuration.api_key = saved
    assert status == 201, body
    return str(body["status"]["userInfo"]["username"])
