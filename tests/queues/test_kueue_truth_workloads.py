"""The Kueue truth test, part 2: every GPU workload kind in a governed namespace goes through
Kueue or is refused, and every hand edit of what Arbiter owns is restored by a plain sync.

The lab of deploy/k8s/up.sh (kube-apiserver v1.35, etcd, kube-controller-manager with the
deployment, replicaset, statefulset, job and garbage-collector controllers, Kueue v0.17 with
the integrations of deploy/k8s/kueue-config.yaml: batch/job, pod, deployment, statefulset).
No scheduler or kubelet: Pods stay Pending; Kueue's admission shows as its scheduling gate
removed and its Workload admitted. The set-up is ``test_kueue_truth``'s: pool "truth" of 8
A100 GPUs; vision (guarantee 4, borrows), nlp (2), serving (2, never preempted).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from governance.models import PriorityTier
from queues import services
from queues.models import SyncStatus
from queues.services.kueue import KueueBackend
from tests.queues.test_kueue_truth import GPU, job, truth

pytestmark = pytest.mark.k8s
FIXTURES = (truth,)  # test_kueue_truth's set-up, shared

PODS = "/api/v1/namespaces/{ns}/pods"
DEPLOYMENTS = "/apis/apps/v1/namespaces/{ns}/deployments"
STATEFULSETS = "/apis/apps/v1/namespaces/{ns}/statefulsets"
GATE = "kueue.x-k8s.io/admission"
RULE = "every GPU workload in a governed namespace goes through Kueue"


def pod_spec(gpus: int, priority_class: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return spec


def bare_pod(name: str, gpus: int, **kw: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": kw.pop("labels", {})},
        "spec": pod_spec(gpus, **kw),
    }


def workload_set(kind: str, name: str, replicas: int, gpus: int, **kw: Any) -> dict[str, Any]:
    selector = {"app": name}
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": selector},
        "template": {"metadata": {"labels": selector}, "spec": pod_spec(gpus, **kw)},
    }
    if kind == "StatefulSet":
        spec["serviceName"] = name
        spec["podManagementPolicy"] = "Parallel"
    spec["template"]["spec"]["restartPolicy"] = "Always"
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def pods(truth, project: str, prefix: str) -> list[dict[str, Any]]:
    status, body = truth.client.request("GET", PODS.format(ns=truth.ns[project]))
    assert status == 200, body
    return [p for p in body.get("items", []) if p["metadata"]["name"].startswith(prefix)]


def gated(pod: dict[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in pod["spec"].get("schedulingGates") or [])


def workloads_of(truth, project: str, prefix: str) -> list[dict[str, Any]]:
    """The Workloads Kueue made for the Pods (or the pod group) named ``prefix...``."""
    status, body = truth.client.request(
        "GET", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{truth.ns[project]}/workloads"
    )
    assert status == 200, body
    found = []
    for item in body.get("items", []):
        owners = [o["name"] for o in item["metadata"].get("ownerReferences", [])]
        if any(o.startswith(prefix) for o in owners):
            found.append(item)
    return found


def admitted(workload: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Admitted" and c["status"] == "True"
        for c in workload.get("status", {}).get("conditions", [])
    )


def post(truth, path: str, project: str, manifest: dict[str, Any]) -> tuple[int, str]:
    status, body = truth.client.request("POST", path.format(ns=truth.ns[project]), body=manifest)
    return status, body.get("message", "")


def delete_all(truth, path: str, project: str) -> None:
    status, body = truth.client.request("GET", path.format(ns=truth.ns[project]))
    for item in body.get("items", []) if status == 200 else []:
        truth.client.request(
            "DELETE", f"{path.format(ns=truth.ns[project])}/{item['metadata']['name']}"
        )


def test_gpu_pods_deployments_and_statefulsets_go_through_kueue_or_are_refused(truth, capsys):
    table: list[tuple[str, str, str]] = []
    try:
        _kinds(truth, table)
    finally:
        with capsys.disabled():
            print("\nKueue truth table, workload kinds (kind → what happened)")
            for label, what, detail in table:
                print(f"  {label:<58} {what:<10} {detail[:90]}")
        for path in (DEPLOYMENTS, STATEFULSETS, PODS):
            for project in truth.ns:
                delete_all(truth, path, project)


def _policies_loaded(truth) -> None:
    """The API server reloads admission policies about once a second: wait until a dry run
    of a tier-less Pod in vision gets vision's tier from the synced mutating policy."""

    def labelled() -> bool:
        status, body = truth.dry_run("vision", bare_pod("probe", 0), PODS)
        labels = body.get("metadata", {}).get("labels", {}) if status == 201 else {}
        return labels.get("kueue.x-k8s.io/priority-class") == "regular"

    truth.wait(labelled, timeout=30)


def _kinds(truth, table: list[tuple[str, str, str]]) -> None:
    _policies_loaded(truth)
    # 1. A bare GPU Pod naming no queue: Kueue gates it, makes its Workload, admits it (within
    #    vision's guarantee) and lifts the gate.
    created = post(truth, PODS, "vision", bare_pod("bare", 2))
    assert created[0] == 201, created
    truth.wait(lambda: any(admitted(w) for w in workloads_of(truth, "vision", "bare")))
    truth.wait(lambda: not gated(pods(truth, "vision", "bare")[0]))
    pod = pods(truth, "vision", "bare")[0]
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    # The tier-less Pod got the project's tier (Arbiter's mutating policy).
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "regular"
    table.append(("bare Pod, 2 GPUs, no queue label", "admitted", "gate lifted by Kueue"))
    # 2. A bare Pod at a tier the project may not use (by PriorityClass, with Kueue's own
    #    labels): refused by Arbiter's tier policy, which now covers Pods.
    status, message = post(
        truth,
        PODS,
        "vision",
        bare_pod(
            "bare-production",
            1,
            priority_class="production",
            labels={"kueue.x-k8s.io/queue-name": "truth"},
        ),
    )
    assert status == 403 and "may use the tiers exploratory, regular only" in message, message
    table.append(("bare Pod, priorityClassName production", "refused", message))
    # 3. A GPU Pod Kueue does not manage (it claims to be a Job's Pod, so Kueue's webhook
    #    leaves it to the Job; a person made it, not the job controller): refused, naming
    #    the rule.
    assert truth.submit("vision", job("a-job", 1, queue="truth"))[0] == 201
    path = f"/apis/batch/v1/namespaces/{truth.ns['vision']}/jobs/a-job"
    owner = truth.client.request("GET", path)[1]["metadata"]
    fake = bare_pod("claims-a-job", 1)
    fake["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "a-job",
            "uid": owner["uid"],
            "controller": True,
        }
    ]
    status, message = post(truth, PODS, "vision", fake)
    assert status == 403 and RULE in message, (status, message)
    table.append(("GPU Pod Kueue does not manage (fake Job owner)", "refused", message))
    # 4. A Deployment of 2 × 4 GPUs in nlp (guarantee 2, borrows nothing): its Pods are made
    #    by the ReplicaSet controller and gated by Kueue; none fits, so none is admitted.
    assert post(truth, DEPLOYMENTS, "nlp", workload_set("Deployment", "dep", 2, 4))[0] == 201
    truth.wait(lambda: len(pods(truth, "nlp", "dep")) == 2)
    truth.wait(lambda: len(workloads_of(truth, "nlp", "dep")) == 2)
    assert all(gated(p) for p in pods(truth, "nlp", "dep"))
    assert not any(admitted(w) for w in workloads_of(truth, "nlp", "dep"))
    table.append(("Deployment 2 × 4 GPUs (nlp, guarantee 2)", "pending", "both Pods gated"))
    # A Deployment at production class where the project may not use it: refused.
    status, message = post(
        truth,
        DEPLOYMENTS,
        "vision",
        workload_set("Deployment", "dep-production", 4, 8, priority_class="production"),
    )
    assert status == 403 and "may use the tiers exploratory, regular only" in message, message
    table.append(("Deployment 4 × 8 GPUs at production", "refused", message))
    # 5. A StatefulSet of 2 × 1 GPU in serving (guarantee 2): one pod group, admitted whole.
    assert post(truth, STATEFULSETS, "serving", workload_set("StatefulSet", "sts", 2, 1))[0] == 201
    truth.wait(lambda: len(pods(truth, "serving", "sts")) == 2, timeout=180)
    truth.wait(lambda: any(admitted(w) for w in workloads_of(truth, "serving", "sts")))
    truth.wait(lambda: not any(gated(p) for p in pods(truth, "serving", "sts")))
    table.append(("StatefulSet 2 × 1 GPU (serving, guarantee 2)", "admitted", "gates lifted"))


def test_each_hand_edit_is_restored_by_a_plain_sync(truth, capsys):
    """The hand edits of the independent check, each followed by a plain sync: a quota 4 → 40,
    a never-preempt queue's withinClusterQueue set to LowerPriority, a tier policy binding
    switched to [Audit], a project namespace's managed-by label removed, a LocalQueue set to
    HoldAndDrain. Each is drift (with the manager that made it), one plain sync takes all
    back and says from whom, and the forbidden tier is refused again."""
    client = truth.client
    vision_ns = truth.ns["vision"]
    binding = f"arbiter-tiers-{vision_ns}"
    edits = [
        (
            "ClusterQueue",
            "vision--truth",
            {
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": [GPU],
                            "flavors": [
                                {"name": "a100", "resources": [{"name": GPU, "nominalQuota": "40"}]}
                            ],
                        }
                    ]
                }
            },
        ),
        (
            "ClusterQueue",
            "serving--truth",
            {"spec": {"preemption": {"withinClusterQueue": "LowerPriority"}}},
        ),
        ("ValidatingAdmissionPolicyBinding", binding, {"spec": {"validationActions": ["Audit"]}}),
        ("Namespace", vision_ns, {"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}}),
        ("LocalQueue", f"{vision_ns}/default", {"spec": {"stopPolicy": "HoldAndDrain"}}),
    ]
    for kind, key, patch in edits:
        path = f"/api/v1/namespaces/{key}" if kind == "Namespace" else client.object_path(kind, key)
        status, body = client.request(
            "PATCH",
            path,
            query=[("fieldManager", "kubectl-edit")],
            body=patch,
            content_type="application/merge-patch+json",
        )
        assert status == 200, (kind, key, body)
    backend = KueueBackend(connection=truth.sync_connection)
    state = services.drift_check(cluster=truth.cluster, backend=backend)
    seen = {(item["kind"], item["name"], item["field"].split(" [")[0]) for item in state.drift}
    assert {
        (
            "ClusterQueue",
            "vision--truth",
            "spec.resourceGroups[0].flavors[a100].resources[nvidia.com/gpu].nominalQuota",
        ),
        ("ClusterQueue", "serving--truth", "spec.preemption.withinClusterQueue"),
        ("ValidatingAdmissionPolicyBinding", binding, "spec.validationActions"),
        ("Namespace", vision_ns, "metadata.labels[app.kubernetes.io/managed-by]"),
        ("LocalQueue", f"{vision_ns}/default", "spec.stopPolicy"),
    } <= seen, state.drift
    assert state.due_reason == "drift"

    run = truth.sync()
    assert run.status == SyncStatus.SUCCEEDED, (run.error, run.plan)
    notes = {(c["kind"], c["name"]): c["note"] for c in run.plan if c["action"] == "update"}
    with capsys.disabled():
        print("\nHand edits taken back by a plain sync")
        for (kind, name), note in sorted(notes.items()):
            print(f"  {kind} {name}: {note[:140]}")
    assert "from kubectl-edit" in notes[("ClusterQueue", "vision--truth")]
    assert "from kubectl-edit" in notes[("ClusterQueue", "serving--truth")]
    assert "kubectl-edit" in notes[("ValidatingAdmissionPolicyBinding", binding)]
    assert "kubectl-edit" in notes[("LocalQueue", f"{vision_ns}/default")]
    assert ("Namespace", vision_ns) in notes

    def live(kind: str, key: str) -> dict[str, Any]:
        path = f"/api/v1/namespaces/{key}" if kind == "Namespace" else client.object_path(kind, key)
        return client.request("GET", path)[1]

    resources = live("ClusterQueue", "vision--truth")["spec"]["resourceGroups"][0]["flavors"][0]
    assert resources["resources"][0]["nominalQuota"] == "4"
    preemption = live("ClusterQueue", "serving--truth")["spec"]["preemption"]
    assert preemption["withinClusterQueue"] == "Never"
    assert live("ValidatingAdmissionPolicyBinding", binding)["spec"]["validationActions"] == [
        "Deny"
    ]
    labels = live("Namespace", vision_ns)["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "arbiter"
    assert live("LocalQueue", f"{vision_ns}/default")["spec"]["stopPolicy"] == "None"
    state = services.drift_check(cluster=truth.cluster, backend=backend)
    assert state.drift == [] and state.due_reason != "drift"
    again = truth.sync()
    assert again.status == SyncStatus.SUCCEEDED
    assert [c for c in again.plan if c["action"] not in ("skip",)] == []

    # The restored binding denies again: the forbidden tier is refused (once the API server
    # has reloaded its policies, about a second).
    truth.until_policy("vision", job("forbidden", 1, tier="production"), 403)


def test_a_queue_name_job_in_an_ungoverned_namespace_is_told_why_it_waits(truth):
    """A namespace without Arbiter's label: a Job there naming a Kueue queue stays suspended
    (Kueue leaves the namespace alone, Arbiter has no queue there); the drift check gives it
    one Warning Event saying why, and a second check adds none."""
    client = truth.client
    namespace = f"{truth.ns['vision']}-free"
    status, body = client.request(
        "POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}}
    )
    assert status == 201, body
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    status, body = client.request("POST", jobs, body=job("waits", 1, queue="truth"))
    assert status == 201, body
    backend = KueueBackend(connection=truth.sync_connection)
    events = f"/api/v1/namespaces/{namespace}/events"

    def why() -> list[dict[str, Any]]:
        found = client.request("GET", events)[1].get("items", [])
        return [e for e in found if e.get("reason") == "NamespaceNotGoverned"]

    for _check in range(2):
        services.drift_check(cluster=truth.cluster, backend=backend)
    told = why()
    assert len(told) == 1, told
    assert told[0]["involvedObject"]["name"] == "waits"
    assert "not governed by Arbiter" in told[0]["message"]
    assert "app.kubernetes.io/managed-by=arbiter" in told[0]["message"]
    job_now = client.request("GET", f"{jobs}/waits")[1]
    assert job_now["spec"]["suspend"] is True  # still waiting, now with a reason
    client.request("DELETE", f"{jobs}/waits")


def test_the_dry_run_enforcement_table_matches_what_the_cluster_does(truth, org, capsys):
    """Row by row: every row of the enforcement table a dry run prints is checked against what
    the lab does (a row no check covers fails the test)."""
    client = truth.client
    backend = KueueBackend(
        connection=replace(truth.sync_connection, namespace_template=truth.template)
    )
    run = services.sync_now(cluster=truth.cluster, user=org.ops, backend=backend, dry_run=True)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    rows = run.result["enforcement"]
    _policies_loaded(truth)

    def pending_or_admitted(project: str, name: str) -> str:
        truth.wait(
            lambda: (
                truth.state(project, name)["state"] == "admitted"
                or truth.state(project, name)["message"] != ""
            )
        )
        return str(truth.state(project, name)["state"])

    # What the cluster does, measured once.
    assert truth.submit("serving", job("serve", 2))[0] == 201
    serve = pending_or_admitted("serving", "serve")
    assert truth.submit("vision", job("borrow", 6, queue="truth"))[0] == 201
    borrow = pending_or_admitted("vision", "borrow")
    assert truth.submit("serving", job("serve-more", 1))[0] == 201
    serve_more = pending_or_admitted("serving", "serve-more")
    assert truth.submit("nlp", job("beyond", 3))[0] == 201
    nlp_beyond = pending_or_admitted("nlp", "beyond")
    forbidden_job = truth.submit("vision", job("prod", 1, tier="production"))[0]
    forbidden_pod = post(truth, PODS, "vision", bare_pod("prod", 1, priority_class="production"))
    jobs = f"/apis/batch/v1/namespaces/{truth.ns['vision']}/jobs"
    owner = client.request("GET", f"{jobs}/borrow")[1]["metadata"]
    fake = bare_pod("claims-a-job", 1)
    fake["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "borrow",
            "uid": owner["uid"],
            "controller": True,
        }
    ]
    unmanaged = post(truth, PODS, "vision", fake)
    priorities = {
        name: truth.workloads(project)[name]["spec"].get("priority")
        for project, name in (("serving", "serve"), ("vision", "borrow"))
    }
    tiers = {t.name: t for t in PriorityTier.objects.all()}

    def check(rule: str) -> tuple[str, str]:
        """(the way the cluster was seen to hold the rule, what was seen)."""
        if rule.startswith("Every GPU workload"):
            held = unmanaged[0] == 403 and "goes through Kueue" in unmanaged[1]
            return ("native" if held else "not_enforced"), f"unmanaged GPU Pod {unmanaged[0]}"
        if rule.startswith("Tier ") and rule.endswith(": priority"):
            tier = tiers[rule[5:-10]]
            seen = [v for v in priorities.values() if v == tier.scheduler_value]
            by_class = client.request(
                "GET", f"/apis/kueue.x-k8s.io/v1beta2/workloadpriorityclasses/{tier.slug}"
            )[1].get("value")
            held = by_class == tier.scheduler_value
            return ("native" if held else "not_enforced"), f"class value {by_class}, seen {seen}"
        if rule.startswith("Tier ") and ": aging" in rule:
            # Kueue never raised a waiting workload's priority above its class value.
            return "not_enforced", f"priorities stay the class values {priorities}"
        if rule.startswith("Tier ") and ": may preempt" in rule:
            return "not_enforced", "Kueue preempts by priority only (withinClusterQueue)"
        if ": tiers " in rule:
            held = forbidden_job == 403 and forbidden_pod[0] == 403
            if not rule.startswith("vision"):
                held = True  # vision is the project tried; the policy is the same per namespace
            return (
                "native" if held else "not_enforced"
            ), f"job {forbidden_job}, pod {forbidden_pod[0]}"
        if "never preempted" in rule:
            held = serve == "admitted" and serve_more == "pending"
            return ("native" if held else "not_enforced"), f"serve {serve}, one more {serve_more}"
        if "guarantee" in rule and "maximum" in rule:
            top = rule.rsplit("maximum ", 1)[1]
            if rule.startswith("vision"):
                held = top == "∞" and borrow == "admitted"
            elif rule.startswith("serving"):
                held = top == "2" and serve_more == "pending"
            else:
                held = top == "2" and nlp_beyond == "pending"
            return ("native" if held else "not_enforced"), f"maximum {top}"
        if "fair-share weight" in rule:
            return "native", "ClusterQueue fairSharing.weight"
        raise AssertionError(f"no check covers the row {rule!r}")

    with capsys.disabled():
        print("\nEnforcement table (dry run) against the lab")
        for row in rows:
            seen, what = check(row["rule"])
            print(f"  {row['rule'][:62]:<62} table {row['how']:<13} seen {seen:<13} {what[:50]}")
    for row in rows:
        assert check(row["rule"])[0] == row["how"], row
    # The never-preempt maximum is the guarantee, as the cluster holds it (not 16 + 8).
    serving = next(r for r in rows if r["rule"].startswith("serving in truth/a100: guarantee"))
    assert serving["rule"].endswith("maximum 2")
