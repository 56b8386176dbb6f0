"""Jobs that wait where Arbiter governs nothing: a suspended Job naming a Kueue queue in a
namespace without Arbiter's label gets one Warning Event saying why."""

from __future__ import annotations

from django.utils import timezone
from django.utils.translation import gettext as _

from queues.schedulers.backends import LiveState
from queues.schedulers.kueue.values import FIELD_MANAGER, MANAGED_BY, MANAGED_BY_VALUE, NAMESPACE

from .client import KubeClient

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def flag_ungoverned_jobs(*, client: KubeClient, live: LiveState) -> int:
    """A suspended Job naming a Kueue queue in a namespace Arbiter does not govern (no
    label ``app.kubernetes.io/managed-by=arbiter``) waits for good: there is no queue of
    Arbiter's there and Kueue's ``managedJobsNamespaceSelector`` leaves the namespace
    alone. Each such Job gets one Warning Event saying why (its name is fixed, so a
    second check adds none). Returns how many Events were created."""
    namespaces = live.extra.get("raw", {}).get(NAMESPACE, {})
    governed = {
        name
        for name, obj in namespaces.items()
        if ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) == MANAGED_BY_VALUE
    }
    status, body = client.request(
        "GET", "/apis/batch/v1/jobs", query=[("labelSelector", QUEUE_LABEL)]
    )
    if status != 200:
        return 0
    created = 0
    for item in body.get("items") or []:
        meta = item.get("metadata") or {}
        namespace = meta.get("namespace", "")
        if namespace in governed or not (item.get("spec") or {}).get("suspend"):
            continue
        queue = (meta.get("labels") or {}).get(QUEUE_LABEL, "")
        now = timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.get('name', '')}.arbiter-not-governed"[:253]},
            "involvedObject": {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": meta.get("name", ""),
                "namespace": namespace,
                "uid": meta.get("uid", ""),
            },
            "reason": "NamespaceNotGoverned",
            "type": "Warning",
            "source": {"component": FIELD_MANAGER},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "message": str(
                _(
                    "Arbiter: this Job names the Kueue queue %(queue)s, but namespace "
                    "%(namespace)s is not governed by Arbiter (no label "
                    "app.kubernetes.io/managed-by=arbiter): it has no queue of Arbiter's "
                    "and Kueue does not manage its Jobs, so this Job stays suspended. Run "
                    "it in your project's namespace, or ask ops to give the project this "
                    "namespace."
                )
                % {"queue": queue, "namespace": namespace}
            ),
        }
        status, _body = client.request("POST", f"/api/v1/namespaces/{namespace}/events", body=event)
        created += status == 201
    return created
