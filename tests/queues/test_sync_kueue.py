"""The Kueue sync against a real Kubernetes API server with Kueue (deploy/k8s/up.sh:
kube-apiserver v1.35, etcd 3.6, the Kueue v0.17 controller manager and its webhooks).

Skipped here when no server answers, failing under CI=true. Server-side apply, CRD
structural validation with the CRDs' CEL rules, strict field validation of apply, pruning
and defaulting, built-in admission (PriorityClass rules, namespace lifecycle) and Kueue's
own webhooks are all real; ``test_the_server_refuses_what_the_schema_tier_refuses`` shows
the server and the schema tier agree. Objects survive from test to test (one server per
session): each test's first sync prunes what earlier tests' rules left, as a real sync would.
"""

import base64
import json
import time
from pathlib import Path

import pytest
import yaml

from governance import services as rules
from governance.models import Project, Quota
from queues import services
from queues.models import SyncStatus
from queues.services.kueue import KubeClient, KueueBackend, KueueConnection
from queues.services.kueue.client import ServerRejected
from queues.services.kueue.export import read_exported
from queues.services.kueue.schema import object_violations
from tests.conftest import REASON

pytestmark = pytest.mark.k8s
CQ = "ClusterQueue"
NOMINAL = "spec.resourceGroups[0].flavors[a100].resources[nvidia.com/gpu].nominalQuota"


def sync(org, kube, tmp_path, *, force=False, dry_run=False, template="{project}"):
    backend = KueueBackend(
        connection=kube.sync_connection(tmp_path, template), force_conflicts=force
    )
    run = services.sync_now(cluster=org.cluster, user=org.ops, backend=backend, dry_run=dry_run)
    return run, backend


def get(kube, tmp_path, kind, key):
    client = KubeClient(kube.connection(tmp_path))
    status, body = client.request("GET", client.object_path(kind, key))
    return body if status == 200 else None


def writes_of(run):
    return {(c["kind"], c["name"], c["action"]) for c in run.plan if c["action"] != "skip"}


def test_a_sync_applies_the_objects_and_a_resync_writes_nothing(org, kube, tmp_path):
    org.project("vision", guarantee=8, borrow=4, lending=2)
    org.project("vision", flavor=org.h100, guarantee=2, borrow=None)
    org.project("serving", guarantee=4, preemption_class=org.forbidden, tier=org.production)
    run, backend = sync(org, kube, tmp_path)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    assert run.result["writes"] >= 14
    created = {(c["kind"], c["name"]) for c in run.plan if c["action"] == "create"}
    assert {
        ("ClusterQueue", "vision--training"),
        ("ClusterQueue", "serving--training"),
        ("LocalQueue", "vision/training"),
        ("Cohort", "training"),
        ("Cohort", "training-eu"),
        ("ResourceFlavor", "a100"),
        ("PriorityClass", "production"),
        ("WorkloadPriorityClass", "production"),
    } <= created

    queue = get(kube, tmp_path, CQ, "vision--training")
    assert queue["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "arbiter"
    a100 = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert a100 == {
        "name": "nvidia.com/gpu",
        "nominalQuota": "8",
        "borrowingLimit": "4",
        "lendingLimit": "2",
    }
    # CRD defaults the server added are not Arbiter's fields and cause no change.
    assert queue["spec"]["queueingStrategy"] == "BestEffortFIFO"
    managers = {(m["manager"], m["operation"]) for m in queue["metadata"]["managedFields"]}
    assert ("arbiter", "Apply") in managers
    priority = get(kube, tmp_path, "PriorityClass", "production")
    assert (priority["value"], priority["preemptionPolicy"]) == (950, "Never")
    local_queue = get(kube, tmp_path, "LocalQueue", "serving/training")
    assert local_queue["spec"]["clusterQueue"] == "serving--training"

    again, backend = sync(org, kube, tmp_path)
    assert again.status == SyncStatus.SUCCEEDED, again.error
    assert writes_of(again) == set()
    assert again.result["writes"] == 0
    # One discovery (is MutatingAdmissionPolicy served?), one list per kind, no dry run, no write.
    assert backend.calls == 1 + 11


def test_a_quota_change_changes_exactly_that_field(org, kube, tmp_path):
    _project, quota = org.project("vision", guarantee=8, borrow=4)
    org.project("serving", guarantee=4)
    first, _b = sync(org, kube, tmp_path)
    assert first.status == SyncStatus.SUCCEEDED, first.error
    before = get(kube, tmp_path, CQ, "vision--training")

    rules.quota_update(quota=quota, user=org.ops, reason=REASON, data={"borrow_limit": 6})
    run, _b = sync(org, kube, tmp_path)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    changes = [c for c in run.plan if c["action"] != "skip"]
    assert changes == [
        {
            "kind": CQ,
            "name": "vision--training",
            "action": "update",
            "fields": [
                {
                    "field": NOMINAL.replace("nominalQuota", "borrowingLimit"),
                    "live": "4",
                    "desired": "6",
                }
            ],
            "note": "",
        }
    ]
    assert run.result["writes"] == 1
    after = get(kube, tmp_path, CQ, "vision--training")
    assert after["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] == "6"
    before["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "6"
    assert after["spec"] == before["spec"]

    # Lifting the limit removes the field (server-side apply drops what Arbiter no longer sets).
    rules.quota_update(quota=quota, user=org.ops, reason=REASON, data={"borrow_limit": None})
    run, _b = sync(org, kube, tmp_path)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    lifted = get(kube, tmp_path, CQ, "vision--training")
    assert "borrowingLimit" not in lifted["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]


def test_a_deleted_projects_queues_are_pruned_and_hand_made_objects_left_alone(org, kube, tmp_path):
    org.project("vision")
    org.project("gone", guarantee=2)
    org.project("clash", guarantee=2)
    client = KubeClient(kube.connection(tmp_path))
    hand_made = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": CQ,
        "metadata": {"name": "handmade"},
        "spec": {"namespaceSelector": {}},
    }
    client.request(
        "PATCH",
        client.object_path(CQ, "handmade"),
        query=[("fieldManager", "ops-by-hand")],
        body=hand_made,
        content_type="application/apply-patch+yaml",
    )
    client.request(
        "PATCH",
        client.object_path(CQ, "clash--training"),
        query=[("fieldManager", "ops-by-hand")],
        body={**hand_made, "metadata": {"name": "clash--training"}},
        content_type="application/apply-patch+yaml",
    )
    run, _b = sync(org, kube, tmp_path)
    # A name clash with a hand-made object is a conflict: the sync needs attention.
    assert run.status == SyncStatus.NEEDS_ATTENTION, run.error
    assert (CQ, "clash--training", "conflict") in writes_of(run)
    assert get(kube, tmp_path, CQ, "gone--training") is not None

    # The test removes its rows at once (a deletion through a rule change needs a second
    # person, and the project's quotas to go first): only the sync's pruning is under test.
    Quota.objects.filter(project__slug="gone").delete()
    Project.objects.filter(slug="gone").delete()
    run, _b = sync(org, kube, tmp_path)
    assert run.status == SyncStatus.NEEDS_ATTENTION, run.error  # the clash is still there
    assert {(c["kind"], c["name"]) for c in run.plan if c["action"] == "delete"} == {
        (CQ, "gone--training"),
        ("LocalQueue", "gone/training"),
        ("LocalQueue", "gone/default"),
        ("ValidatingAdmissionPolicy", "arbiter-tiers-gone"),
        ("ValidatingAdmissionPolicyBinding", "arbiter-tiers-gone"),
        ("MutatingAdmissionPolicy", "arbiter-tiers-gone"),
        ("MutatingAdmissionPolicyBinding", "arbiter-tiers-gone"),
    }
    # Kueue removes its resource-in-use finalizer from an unused queue a moment later.
    deadline = time.monotonic() + 60
    while get(kube, tmp_path, CQ, "gone--training") is not None:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    assert get(kube, tmp_path, "LocalQueue", "gone/training") is None
    assert get(kube, tmp_path, "Namespace", "gone") is not None  # never deleted
    assert get(kube, tmp_path, CQ, "handmade") is not None
    clash = get(kube, tmp_path, CQ, "clash--training")
    assert "labels" not in clash["metadata"] and clash["spec"]["namespaceSelector"] == {}
    for name in ("handmade", "clash--training"):
        client.delete(CQ, name)
    client.close()


def test_a_hand_made_change_is_drift_and_a_plain_sync_takes_it_back(org, kube, tmp_path):
    org.project("vision", guarantee=8, borrow=4)
    run, _b = sync(org, kube, tmp_path)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    live = get(kube, tmp_path, CQ, "vision--training")
    groups = live["spec"]["resourceGroups"]
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "12000m"  # 12, written oddly
    client = KubeClient(kube.connection(tmp_path))
    status, body = client.request(
        "PATCH",
        client.object_path(CQ, "vision--training"),
        query=[("fieldManager", "kubectl-edit")],
        body={"spec": {"resourceGroups": groups}},
        content_type="application/merge-patch+json",
    )
    assert status == 200, body
    client.close()

    backend = KueueBackend(connection=kube.sync_connection(tmp_path))
    state = services.drift_check(cluster=org.cluster, backend=backend)
    assert state.drift_error == ""
    assert state.drift == [
        {
            "kind": CQ,
            "name": "vision--training",
            "field": f"{NOMINAL} [owned by kubectl-edit (Update)]",
            "applied": "8",
            "live": "12",
            "note": "",
        }
    ]

    # A plain sync takes the field back (server-side apply, forced on Arbiter's own fields
    # only) and its run says what it took back from whom.
    run, _b = sync(org, kube, tmp_path)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    assert run.result["writes"] == 1
    update = next(c for c in run.plan if c["action"] == "update")
    assert update["name"] == "vision--training"
    assert "takes back spec.resourceGroups from kubectl-edit" in update["note"], update
    queue = get(kube, tmp_path, CQ, "vision--training")
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "8"
    managers = {e["manager"] for e in queue["metadata"]["managedFields"]}
    assert "arbiter" in managers
    again, _b = sync(org, kube, tmp_path)
    assert writes_of(again) == set()
    backend = KueueBackend(connection=kube.sync_connection(tmp_path))
    assert services.drift_check(cluster=org.cluster, backend=backend).drift == []


def test_a_server_side_rejection_fails_the_sync_with_a_clear_error(org, kube, tmp_path):
    """The project's namespace is being deleted (no controller manager runs, so it stays
    Terminating): the server's dry run refuses the LocalQueue, the sync fails naming the
    rule, and nothing is written."""
    client = KubeClient(kube.connection(tmp_path))
    client.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "doomed"}})
    client.request("DELETE", "/api/v1/namespaces/doomed")
    org.project("doomed", guarantee=2)
    run, backend = sync(org, kube, tmp_path)
    assert run.status == SyncStatus.FAILED
    assert "LocalQueue doomed/training" in run.error
    assert "being terminated" in run.error
    assert "(from quotas of project doomed in pool training)" in run.error
    assert backend.client.writes == 0
    assert get(kube, tmp_path, CQ, "doomed--training") is None

    # A bad value reaching the server is refused with the server's own message.
    with pytest.raises(ServerRejected, match="maximum allowed value of a user defined priority"):
        client.apply(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "too-high"},
                "value": 2_000_000_000,
            }
        )
    client.close()


def test_the_server_refuses_what_the_schema_tier_refuses(kube, tmp_path):
    """A ClusterQueue using the v1beta1 field name ``cohort`` (an unknown field: server-side
    apply refuses it) and, once that is fixed, breaking a CEL rule (borrowingLimit without a
    cohort): the API server refuses both, as the schema tier does before anything is sent."""
    resources = {"name": "nvidia.com/gpu", "nominalQuota": "1", "borrowingLimit": "1"}
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": CQ,
        "metadata": {"name": "refused-by-the-server"},
        "spec": {
            "cohort": "training",
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": "a100", "resources": [resources]}],
                }
            ],
        },
    }
    messages = " ".join(message for _path, message in object_violations(queue))
    assert "('cohort' was unexpected)" in messages
    assert "borrowingLimit must be nil when cohort is empty" in messages
    client = KubeClient(kube.connection(tmp_path))
    with pytest.raises(ServerRejected, match=r"\.spec\.cohort: field not declared in schema"):
        client.apply(queue)
    del queue["spec"]["cohort"]
    with pytest.raises(ServerRejected, match="borrowingLimit must be nil when cohort is empty"):
        client.apply(queue)
    assert all(item["metadata"]["name"] != "refused-by-the-server" for item in client.list(CQ))
    client.close()


def test_the_demo_export_is_accepted_by_a_server_dry_run(ops, kube, tmp_path):
    rules.demo_seed(password="pw")
    from governance.models import Pool

    cluster = services.cluster_create(
        user=ops, reason=REASON, name="demo", slurm_cluster="demo", pools=list(Pool.objects.all())
    )
    out = tmp_path / "export"
    out.mkdir()
    result = services.sync_export(cluster=cluster, directory=str(out))
    assert len(result.written) > 20
    objects = read_exported(out)
    kinds = {obj["kind"] for obj in objects}
    assert kinds == {
        "Namespace",
        "PriorityClass",
        "WorkloadPriorityClass",
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    }
    client = KubeClient(kube.connection(tmp_path))
    # A namespaced object's dry run needs its namespace to exist: namespaces are created
    # (Arbiter never deletes them); everything else is only a server-side dry run.
    for obj in objects:
        if obj["kind"] == "Namespace":
            client.apply(obj)
    for obj in objects:
        if obj["kind"] != "Namespace":
            answer = client.apply(obj, dry_run=True, force=True)
            assert answer["metadata"]["name"] == obj["metadata"]["name"]
    client.close()


def test_a_kubeconfig_file_works_as_credentials(org, kube, tmp_path):
    org.project("vision")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "test",
                "cluster": {
                    "server": kube.api_server,
                    "certificate-authority-data": base64.b64encode(
                        kube.ca_bundle.encode()
                    ).decode(),
                },
            }
        ],
        "users": [{"name": "arbiter", "user": {"token": kube.sync_as}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "arbiter"}}],
        "current-context": "test",
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    backend = KueueBackend(
        connection=KueueConnection(credentials_path=str(tmp_path / "kubeconfig"))
    )
    run = services.sync_now(cluster=org.cluster, user=org.ops, backend=backend, dry_run=True)
    assert run.status == SyncStatus.SUCCEEDED, run.error


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"token": "wrong"}, "refused Arbiter's credentials (401)"),
        ({"ca_bundle": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}, ""),
        ({"api_server": "https://127.0.0.1:9"}, "does not answer"),
    ],
)
def test_bad_connection_settings_are_clear_errors(org, kube, tmp_path, change, message):
    org.project("vision")
    connection = kube.sync_connection(tmp_path)
    if "token" in change:
        Path(connection.credentials_path).write_text(change["token"])
        change = {}
    fields = {**connection.__dict__, **change}
    backend = KueueBackend(connection=KueueConnection(**fields))
    run = services.sync_now(cluster=org.cluster, user=org.ops, backend=backend)
    assert run.status == SyncStatus.FAILED
    assert message in run.error and run.error
    assert json.dumps(run.result)  # recorded, not raised


def test_a_new_default_tier_and_a_new_tier_value_are_applied(org, kube, tmp_path):
    """Kubernetes allows one global default PriorityClass and forbids changing a value in
    place: the old default gives way first, and a class whose value changes is recreated."""
    org.project("vision")
    run, _b = sync(org, kube, tmp_path)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    rules.tier_update(
        tier=org.production,
        user=org.ops,
        reason=REASON,
        data={"is_default": True, "scheduler_value": 990},
    )
    run, _b = sync(org, kube, tmp_path)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    production = get(kube, tmp_path, "PriorityClass", "production")
    assert (production["value"], production["globalDefault"]) == (990, True)
    assert get(kube, tmp_path, "PriorityClass", "regular").get("globalDefault") in (False, None)
    assert get(kube, tmp_path, "WorkloadPriorityClass", "production")["value"] == 990
    again, _b = sync(org, kube, tmp_path)
    assert writes_of(again) == set()
