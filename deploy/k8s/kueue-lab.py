"""Helpers of deploy/k8s/up.sh for a Kueue that runs outside the cluster (Python 3 + PyYAML).

    python3 kueue-lab.py webhooks MANIFESTS_YAML CA_CRT URL_BASE > webhooks.yaml
    python3 kueue-lab.py apply SERVER CA_CRT TOKEN_FILE FILE.yaml...

``webhooks`` reads the Kueue module's ``config/components/webhook/manifests.yaml`` and keeps
the webhooks of the integrations the lab enables and serves (Kueue's own objects, ``batch/v1``
Jobs, Pods, Deployments and StatefulSets: the other paths are not served when their
integration is off or their CRD absent, and a ``Fail`` webhook the server does not serve would
refuse every object of its kind). Each ``clientConfig.service``
becomes ``url: URL_BASE + path`` with the CA that signed the webhook server's certificate.

``apply`` creates each object of the YAML files, or replaces it when it exists (no kubectl
here: the lab has only the API server).
"""

from __future__ import annotations

import base64
import json
import ssl
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import yaml

KEPT = (
    "-kueue-x-k8s-io-",
    "-batch-v1-job",
    "--v1-pod",
    "-apps-v1-deployment",
    "-apps-v1-statefulset",
)
SYSTEM_EXCLUDED = ("pod.kb.io", "deployment.kb.io", "statefulset.kb.io")
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
CLUSTER_PATHS = {
    "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    "MutatingWebhookConfiguration": f"{ADMISSION}/mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": f"{ADMISSION}/validatingwebhookconfigurations",
    "Namespace": "/api/v1/namespaces",
}


def webhooks(manifests: str, ca_file: str, url_base: str) -> None:
    with open(ca_file, "rb") as handle:
        ca = base64.b64encode(handle.read()).decode()
    out = []
    with open(manifests) as handle:
        documents = [doc for doc in yaml.safe_load_all(handle) if doc]
    for doc in documents:
        hooks = []
        for hook in doc.get("webhooks", []):
            path = hook["clientConfig"]["service"]["path"]
            if not any(part in path for part in KEPT):
                continue
            hook["clientConfig"] = {"url": url_base.rstrip("/") + path, "caBundle": ca}
            if hook["name"][1:] in SYSTEM_EXCLUDED:
                # As Kueue's kustomization patches them: never the system namespaces' Pods.
                hook["namespaceSelector"] = {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": ["kube-system", "kueue-system"],
                        }
                    ]
                }
            hooks.append(hook)
        doc["webhooks"] = hooks
        doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
        out.append(doc)
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)


def _call(
    server: str,
    context: ssl.SSLContext,
    token: str,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        server + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def apply(server: str, ca_file: str, token_file: str, *files: str) -> None:
    context = ssl.create_default_context(cafile=ca_file)
    with open(token_file) as handle:
        token = handle.read().strip()
    waiting: list[str] = []
    for name in files:
        with open(name) as handle:
            documents = [doc for doc in yaml.safe_load_all(handle) if doc]
        for doc in documents:
            base = CLUSTER_PATHS[doc["kind"]]
            path = f"{base}/{doc['metadata']['name']}"
            status, live = _call(server, context, token, "GET", path)
            if status == 200:
                doc["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
                status, answer = _call(server, context, token, "PUT", path, doc)
            else:
                status, answer = _call(server, context, token, "POST", base, doc)
            if status not in (200, 201):
                name = f"{doc['kind']} {doc['metadata']['name']}"
                sys.exit(f"{name}: {status} {answer.get('message')}")
            if doc["kind"] == "CustomResourceDefinition":
                waiting.append(path)
    # A CRD serves its kind only once Established; Kueue refuses to start before.
    deadline = time.monotonic() + 60
    for path in waiting:
        while True:
            _status, live = _call(server, context, token, "GET", path)
            conditions = (live.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                break
            if time.monotonic() > deadline:
                sys.exit(f"{path} is not Established after 60 s")
            time.sleep(0.5)


if __name__ == "__main__":
    command, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if command == "webhooks" and len(args) == 3:
        webhooks(*args)
    elif command == "apply" and len(args) >= 4:
        apply(*args)
    else:
        sys.exit(__doc__)
