"""The Kueue truth test: with the rules synced, the real Kueue admits exactly what they allow.

The Kubernetes twin of the Slurm truth tests. It needs the lab of deploy/k8s/up.sh
(kube-apiserver v1.35, etcd, the Kueue v0.17 controller manager with its webhooks and the
configuration in deploy/k8s/kueue-config.yaml); skipped here when it does not answer,
failing under CI=true. There is no kube-scheduler or kubelet: Jobs are submitted suspended
(Kueue's webhook suspends them anyway), Kueue creates a Workload per Job and admits,
borrows, reclaims and preempts on those Workloads, and the test reads that back.

One pool "truth" of 8 A100 GPUs (nothing left over for its cohort), three projects:

* vision: guarantee 4, may borrow without limit, preemption class *cautious*;
* nlp: guarantee 2, borrow 0 (it reclaims what vision borrowed);
* serving: guarantee 2, class *forbidden* (never preempted: so it never borrows).

The combinations are printed as a table (``-s`` shows it; CI logs it). A Job naming no tier
gets its project's effective tier, grants included, from Arbiter's MutatingAdmissionPolicy
(the lab's API server serves it; see deploy/k8s/up.sh).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from governance import services as rules
from governance.models import GrantKind, PriorityTier, Project, Quota, Terms
from queues import services
from queues.models import SyncStatus
from queues.schedulers.classify import classify
from queues.services.kueue import KubeClient, KueueBackend
from queues.services.sync import enforcement_for
from tests.conftest import REASON

pytestmark = pytest.mark.k8s

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"
JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"
GPU = "nvidia.com/gpu"
CAPACITY = 8


def job(name: str, gpus: int, *, queue: str = "", tier: str = "", typed: bool = False) -> dict:
    labels = {}
    if queue:
        labels["kueue.x-k8s.io/queue-name"] = queue
    if tier:
        labels["kueue.x-k8s.io/priority-class"] = tier
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                # cpu and memory too, as real jobs ask: Kueue's configuration excludes them.
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi", GPU: str(gpus)},
                    "limits": {GPU: str(gpus)},
                },
            }
        ],
    }
    if typed:  # a typed request: the flavor's node label
        pod["nodeSelector"] = {"gpu.example.com/model": "a100"}
        pod["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {"suspend": True, "template": {"spec": pod}},
    }


class Cluster:
    def __init__(self, client: KubeClient, namespaces: dict[str, str], sync: Callable) -> None:
        self.client = client
        self.ns = namespaces
        self.sync = sync

    def submit(self, project: str, manifest: dict) -> tuple[int, str]:
        status, body = self.client.request("POST", JOBS.format(ns=self.ns[project]), body=manifest)
        return status, body.get("message", "")

    def dry_run(self, project: str, manifest: dict, path: str = JOBS) -> tuple[int, dict]:
        """A server dry run of creating ``manifest`` in ``project``'s namespace."""
        return self.client.request(
            "POST", path.format(ns=self.ns[project]), query=[("dryRun", "All")], body=manifest
        )

    def until_policy(self, project: str, manifest: dict, status: int) -> None:
        """Wait until a dry run of ``manifest`` answers ``status``: the API server reloads
        admission policies through an informer, about once a second, after the sync wrote
        them (the full CI run once submitted a Job before the server had read its policy)."""
        answers: list[tuple[int, dict]] = []

        def answered() -> bool:
            answers.append(self.dry_run(project, manifest))
            return answers[-1][0] == status

        try:
            self.wait(answered, timeout=30)
        except AssertionError as error:
            raise AssertionError(f"{error}; the last dry run answered {answers[-1]}") from error

    def workloads(self, project: str) -> dict[str, dict]:
        status, body = self.client.request("GET", WORKLOADS.format(ns=self.ns[project]))
        assert status == 200, body
        found = {}
        for item in body.get("items", []):
            owners = item["metadata"].get("ownerReferences", [])
            if owners:
                found[owners[0]["name"]] = item
        return found

    def state(self, project: str, name: str) -> dict[str, Any]:
        """admitted / pending (reason, message) / preempted, and the admitted GPUs."""
        workload = self.workloads(project).get(name)
        if workload is None:
            return {"state": "no workload", "gpus": 0, "reason": "", "message": ""}
        conditions = {c["type"]: c for c in workload.get("status", {}).get("conditions", [])}
        gpus = 0
        admission = workload.get("status", {}).get("admission")
        if admission:
            for podset in admission.get("podSetAssignments", []):
                gpus += int(podset.get("resourceUsage", {}).get(GPU, "0"))
        preempted = conditions.get("Preempted", {}).get("status") == "True"
        if conditions.get("Admitted", {}).get("status") == "True":
            state = "admitted"
        elif preempted:
            state = "preempted"
        else:
            state = "pending"
        reserved = conditions.get("QuotaReserved", {})
        reason = conditions.get("Preempted", {}) if preempted else reserved
        return {
            "state": state,
            "gpus": gpus if state == "admitted" else 0,
            "reason": reason.get("reason", ""),
            "message": reason.get("message", ""),
            "queue": admission.get("clusterQueue", "") if admission else "",
        }

    def wait(self, what: Callable[[], bool], timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not what():
            if time.monotonic() > deadline:
                raise AssertionError("Kueue did not get there in time")
            time.sleep(0.5)

    def cleanup(self) -> None:
        """Jobs and Workloads of this run deleted (no garbage collector runs: both by hand),
        and gone, so that the next test's queues and flavors are not held by them. Deleted
        again on each look: a Workload Kueue makes for a Job in the moment the Job is deleted
        comes after the first pass."""
        background = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Background",
        }
        left: list[str] = []

        def gone() -> bool:
            left.clear()
            for namespace in self.ns.values():
                for path in (JOBS.format(ns=namespace), WORKLOADS.format(ns=namespace)):
                    _status, body = self.client.request("GET", path)
                    for item in body.get("items") or []:
                        meta = item["metadata"]
                        left.append(f"{path}/{meta['name']} {meta.get('finalizers', [])}")
                        self.client.request("DELETE", f"{path}/{meta['name']}", body=background)
            return not any("/workloads/" in name for name in left)

        try:
            self.wait(gone)
        except AssertionError as error:
            raise AssertionError(f"{error}: still there: {left}") from error


@pytest.fixture
def truth(org, kube, tmp_path):
    kw = {"user": org.ops, "reason": REASON}
    pool = rules.pool_create(**kw, slug="truth", name="Truth")
    rules.pool_capacity_set(**kw, pool=pool, flavor=org.a100, gpus=CAPACITY)
    cautious = rules.preemption_class_create(
        **kw, slug="cautious", name="Cautious", kind="cautious", business_impact="Costly restart."
    )
    org.project("vision", pool=pool, guarantee=4, borrow=None, preemption_class=cautious)
    org.project("nlp", pool=pool, guarantee=2, borrow=0)
    org.project("serving", pool=pool, guarantee=2, borrow=0, preemption_class=org.forbidden)
    cluster = services.cluster_create(**kw, name="truth", slurm_cluster="truth", pools=[pool])
    # Namespaces of this run only: Kubernetes without a controller manager never finishes
    # deleting a namespace, and workloads of earlier runs must not count.
    run_id = uuid.uuid4().hex[:6]
    template = f"t{run_id}-{{project}}"

    def sync():
        backend = KueueBackend(connection=kube.sync_connection(tmp_path, template))
        return services.sync_now(cluster=cluster, user=org.ops, backend=backend, dry_run=False)

    client = KubeClient(kube.connection(tmp_path))
    run = sync()
    assert run.status == SyncStatus.SUCCEEDED, run.error
    lab = Cluster(client, {p: f"t{run_id}-{p}" for p in ("vision", "nlp", "serving")}, sync)
    lab.cluster = cluster
    lab.template = template
    # What a sync connects with (the chart's ServiceAccount under ARBITER_K8S_SYNC_AS=chart).
    lab.sync_connection = kube.sync_connection(tmp_path)
    yield lab
    lab.cleanup()
    client.close()


def test_kueue_admits_exactly_what_the_rules_allow(truth, capsys):
    table: list[tuple[str, str, dict[str, Any]]] = []

    def row(label: str, project: str, name: str) -> dict[str, Any]:
        found = truth.state(project, name)
        table.append((label, f"{project}/{name}", found))
        return found

    def settled(project: str, name: str, *states: str) -> Callable[[], bool]:
        return lambda: truth.state(project, name)["state"] in states

    # 1. Within the guarantee, untyped request, explicit queue: admitted on vision's queue.
    assert truth.submit("vision", job("within", 4, queue="truth"))[0] == 201
    truth.wait(settled("vision", "within", "admitted"))
    # 2. No queue label, typed request: Kueue manages it anyway, in the namespace's "default"
    #    LocalQueue, and admits it on borrowed GPUs (nlp's and serving's unused guarantees).
    assert truth.submit("vision", job("borrowing", 2, typed=True))[0] == 201
    truth.wait(settled("vision", "borrowing", "admitted"))
    first = truth.state("vision", "borrowing")
    assert (first["queue"], first["gpus"]) == ("vision--truth", 2)
    assert truth.workloads("vision")["borrowing"]["spec"]["queueName"] == "default"
    # 3. More than the pool has left: pending for quota, with Kueue's reason.
    assert truth.submit("vision", job("too-much", 4, queue="default"))[0] == 201
    truth.wait(lambda: truth.state("vision", "too-much")["message"] != "")
    # 4. serving (never preempted) within its guarantee: admitted; one more GPU would be
    #    borrowed, which its rules forbid: pending although vision does not use it all.
    assert truth.submit("serving", job("serve", 2))[0] == 201
    truth.wait(settled("serving", "serve", "admitted"))
    # serving's guarantee is now in use: vision's borrowing job was reclaimed (see 5).
    assert truth.submit("serving", job("serve-more", 1))[0] == 201
    truth.wait(lambda: truth.state("serving", "serve-more")["message"] != "")
    # 5. nlp reclaims its guarantee: the cautious borrower is preempted (Kueue has no minimum
    #    runtime: the rule is listed as not enforced on Kueue).
    assert truth.submit("nlp", job("reclaim", 2, queue="truth"))[0] == 201
    truth.wait(settled("nlp", "reclaim", "admitted"))
    # Kueue picks the victim among vision's workloads (vision as a whole borrows): either.
    truth.wait(
        lambda: any(
            truth.state("vision", n)["state"] != "admitted" for n in ("within", "borrowing")
        )
    )

    # 6. Tiers: vision (default tier regular) may not use production, by label or by pod
    #    PriorityClass: the API server refuses the Job at admission (Arbiter's policy).
    refused = truth.submit("vision", job("forbidden-tier", 1, tier="production"))
    assert refused[0] == 403 and "may use the tiers exploratory, regular only" in refused[1]
    table.append(
        (
            "forbidden tier (label production)",
            "vision/forbidden-tier",
            {"state": "refused", "gpus": 0, "reason": "API server", "message": refused[1]},
        )
    )
    # Three GPUs: whichever of vision's two Kueue preempted above, at most two GPUs of the
    # pool are free now (4 + 2 + 2 or 2 + 2 + 2 of 8 in use), so the Job can never fit and
    # its pending state does not depend on Kueue's choice of victim.
    allowed = truth.submit("vision", job("allowed-tier", 3, tier="exploratory"))
    assert allowed[0] == 201, allowed
    truth.wait(
        lambda: (
            truth.state("vision", "allowed-tier")["state"] == "admitted"
            or truth.state("vision", "allowed-tier")["message"] != ""
        )
    )
    # Admitted by the API server; the pool has no room, so Kueue keeps it pending for quota.
    assert (
        "insufficient unused quota"
        in row("allowed tier (label exploratory)", "vision", "allowed-tier")["message"]
    )

    within = row("guarantee, untyped, queue label (cautious)", "vision", "within")
    borrowing = row("no queue label, typed (cautious, borrowed)", "vision", "borrowing")
    too_much = row("beyond the pool", "vision", "too-much")
    serve = row("never-preempt, within guarantee", "serving", "serve")
    serve_more = row("never-preempt, would borrow", "serving", "serve-more")
    reclaim = row("reclaim of a lent guarantee", "nlp", "reclaim")

    with capsys.disabled():
        print("\nKueue truth table (combination → state, GPUs, Kueue's reason)")
        for label, name, found in table:
            reason = f"{found['reason']}: {found['message']}" if found["reason"] else ""
            print(f"  {label:<55} {name:<22} {found['state']:<10} {found['gpus']} {reason}")

    # The reclaim preempted exactly one of vision's two (cautious: no minimum runtime on
    # Kueue), with Kueue's reason; the other is still admitted on vision's queue.
    states = sorted([within["state"], borrowing["state"]])
    assert states in (["admitted", "preempted"], ["admitted", "pending"]), states
    victim = within if within["state"] != "admitted" else borrowing
    survivor = borrowing if victim is within else within
    assert survivor["queue"] == "vision--truth"
    if victim["state"] == "preempted":
        assert victim["reason"] == "InCohortReclamation"
    assert reclaim["state"] == "admitted" and reclaim["queue"] == "nlp--truth"
    # The never-preempt job was never a victim, of the reclaim or of anything else.
    assert serve["state"] == "admitted" and serve["gpus"] == 2
    assert too_much["state"] == "pending"
    assert "insufficient unused quota" in too_much["message"]
    assert serve_more["state"] == "pending"
    # Admitted GPUs never exceed what the rules allow: per project its guarantee plus what it
    # may borrow, never-preempt work never borrows, and the pool's capacity overall.
    admitted: dict[str, int] = {}
    for _label, name, found in table:
        project = name.split("/")[0]
        assert found["state"] != "admitted" or name != "vision/forbidden-tier"
        admitted[project] = admitted.get(project, 0) + found["gpus"]
    assert admitted["serving"] <= 2
    assert admitted["nlp"] <= 2
    assert sum(admitted.values()) <= CAPACITY
    # Every pending reason shown is Kueue's own and Arbiter's classifier knows it.
    for _label, _name, found in table:
        if found["state"] == "pending":
            verdict = classify(scheduler="kueue", reason=found["reason"], message=found["message"])
            assert verdict.known, found


def test_a_queue_still_in_use_is_not_deleted_in_a_loop_and_the_sync_says_why(truth):
    """Kueue keeps a ClusterQueue with workloads (finalizer resource-in-use): the sync that
    prunes it deletes it once; the next ones say what holds it and need attention, without
    deleting again; once its workload is gone the queue goes and the sync is clean."""
    assert truth.submit("nlp", job("holds-the-queue", 1))[0] == 201
    truth.wait(lambda: truth.state("nlp", "holds-the-queue")["state"] == "admitted")
    # The test removes its rows at once (a deletion through a rule change needs a second
    # person, and the project's quotas to go first): only the sync's pruning is under test.
    Quota.objects.filter(project__slug="nlp").delete()
    Project.objects.filter(slug="nlp").delete()
    first = truth.sync()
    assert ("ClusterQueue", "nlp--truth", "delete") in {
        (c["kind"], c["name"], c["action"]) for c in first.plan
    }
    path = truth.client.object_path("ClusterQueue", "nlp--truth")
    status, held = truth.client.request("GET", path)
    assert status == 200 and held["metadata"].get("deletionTimestamp")
    assert "kueue.x-k8s.io/resource-in-use" in held["metadata"]["finalizers"]
    for _attempt in range(2):
        run = truth.sync()
        assert run.status == SyncStatus.NEEDS_ATTENTION, (run.error, run.plan)
        blocked = [c for c in run.plan if (c["kind"], c["name"]) == ("ClusterQueue", "nlp--truth")]
        assert [c["action"] for c in blocked] == ["conflict"]
        assert "resource-in-use" in blocked[0]["note"]
        assert (
            truth.client.request("GET", path)[1]["metadata"]["deletionTimestamp"]
            == (held["metadata"]["deletionTimestamp"])
        )
    truth.cleanup()
    truth.wait(lambda: truth.client.request("GET", path)[0] == 404)
    assert truth.sync().status == SyncStatus.SUCCEEDED


def test_a_stop_policy_set_by_hand_on_a_governed_queue_is_drift(truth):
    """stopPolicy is not a quota, but Hold stops all admission: Arbiter sets Kueue's default
    (None), so a queue someone holds shows as drift with the manager that changed it."""
    path = truth.client.object_path("ClusterQueue", "vision--truth")
    status, body = truth.client.request(
        "PATCH",
        path,
        query=[("fieldManager", "kubectl-edit")],
        body={"spec": {"stopPolicy": "Hold"}},
        content_type="application/merge-patch+json",
    )
    assert status == 200, body
    backend = KueueBackend(connection=truth.sync_connection)
    state = services.drift_check(cluster=truth.cluster, backend=backend)
    assert state.drift_error == ""
    found = [
        (item["name"], item["field"], item["applied"], item["live"])
        for item in state.drift
        if item["kind"] == "ClusterQueue"
    ]
    assert found == [
        ("vision--truth", "spec.stopPolicy [owned by kubectl-edit (Update)]", "None", "Hold")
    ]


def test_a_job_naming_no_tier_gets_its_projects_tier_and_a_grant_raises_it(truth, org, capsys):
    """No global default for a Job naming no tier: Arbiter's MutatingAdmissionPolicy gives it
    its project's effective tier (grants included) as Kueue's priority-class label, so that
    Kueue's Workload has that WorkloadPriorityClass; the sync after the grant ends lowers it
    again. nlp's own tier is exploratory, not the cluster default regular."""
    label = "kueue.x-k8s.io/priority-class"
    assert truth.client.serves("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
    nlp = Project.objects.get(slug="nlp")
    exploratory = PriorityTier.objects.get(slug="exploratory")
    rules.project_update(project=nlp, user=org.ops, reason=REASON, data={"tier": exploratory})
    assert truth.sync().status == SyncStatus.SUCCEEDED
    table: list[tuple[str, str, str, str, int]] = []

    def submitted(name: str, tier: str = "") -> tuple[str, str, int]:
        """The Job's tier label as stored, and its Workload's priority class and value."""
        status, message = truth.submit("nlp", job(name, 1, tier=tier))
        assert status == 201, message
        path = f"{JOBS.format(ns=truth.ns['nlp'])}/{name}"
        stored = truth.client.request("GET", path)[1]["metadata"].get("labels", {})
        truth.wait(lambda: name in truth.workloads("nlp"))
        spec = truth.workloads("nlp")[name]["spec"]
        ref = spec.get("priorityClassRef") or {}
        assert (ref.get("group"), ref.get("kind")) == ("kueue.x-k8s.io", "WorkloadPriorityClass")
        found = (stored.get(label, ""), ref.get("name", ""), spec.get("priority"))
        table.append((name, tier or "-", *found))
        return found

    def loaded(tier: str) -> None:
        """Wait until the API server acts on the synced policy (it reloads admission policies
        about once a second): a server dry run of a Job naming no tier gets ``tier``.

        The mutating and the validating policy reload apart: for a moment the old mutation
        may set the old tier while the new validation refuses it (403). That is a "not yet";
        an answer still refused at the deadline is printed with the failure."""
        answers: list[tuple[int, Any]] = []

        def given() -> str:
            status, body = truth.dry_run("nlp", job("probe", 1))
            answers.append((status, body))
            assert status in (201, 403), body
            return str(body.get("metadata", {}).get("labels", {}).get(label, ""))

        try:
            truth.wait(lambda: given() == tier, timeout=30)
        except AssertionError as error:
            raise AssertionError(f"{error}; the last dry run answered {answers[-1]}") from error

    loaded("exploratory")
    assert submitted("no-tier") == ("exploratory", "exploratory", exploratory.scheduler_value)
    # The validating policy still checks a tier the Job names: regular is above nlp's. (It
    # reloads apart from the mutating one: wait until a dry run is refused too.)
    truth.until_policy("nlp", job("probe", 1, tier="regular"), 403)
    status, message = truth.submit("nlp", job("named-regular", 1, tier="regular"))
    assert status == 403 and "may use the tiers exploratory only" in message, message
    table.append(("named-regular", "regular", "refused", "-", 0))
    # A grant raises nlp to production, ending a few seconds from now; after the sync a Job
    # naming no tier gets production.
    ends = timezone.now() + timedelta(seconds=20)
    rules.grant_create(
        user=org.ops,
        reason=REASON,
        project=nlp,
        terms=Terms(
            kind=GrantKind.PRIORITY_UPGRADE,
            tier=org.production,
            starts_at=timezone.now() - timedelta(minutes=1),
            ends_at=ends,
        ),
    )
    assert truth.sync().status == SyncStatus.SUCCEEDED
    loaded("production")
    assert submitted("granted") == ("production", "production", org.production.scheduler_value)
    # A Job naming a tier the grant allows keeps it: the mutation touches tier-less Jobs only.
    assert submitted("granted-named", "regular") == (
        "regular",
        "regular",
        org.regular.scheduler_value,
    )
    # The grant expires; the next sync gives tier-less Jobs nlp's own tier again.
    time.sleep(max((ends - timezone.now()).total_seconds(), 0) + 1)
    rules.grants_transition()
    assert truth.sync().status == SyncStatus.SUCCEEDED
    loaded("exploratory")
    assert submitted("after-expiry") == (
        "exploratory",
        "exploratory",
        exploratory.scheduler_value,
    )

    with capsys.disabled():
        print("\nJobs naming no tier (project nlp, own tier exploratory, cluster default regular)")
        for name, asked, stored, workload, value in table:
            print(f"  {name:<14} asked {asked:<8} label {stored:<12} workload {workload} ({value})")


def test_api_discovery_tells_served_kinds_from_others(truth):
    """The lab serves MutatingAdmissionPolicy (admissionregistration.k8s.io/v1beta1, enabled by
    deploy/k8s/up.sh); discovery answers no for a group version the server does not serve
    (v1alpha1: 404) and for a resource its served group version does not list."""
    client = truth.client
    assert client.serves("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
    assert client.serves("ValidatingAdmissionPolicy", "ClusterQueue")
    group = "/apis/admissionregistration.k8s.io"
    assert not client.discover(f"{group}/v1alpha1/mutatingadmissionpolicies")
    assert not client.discover(f"{group}/v1beta1/no-such-resources")


def test_where_mutating_policies_are_not_served_a_job_naming_no_tier_is_refused(truth, org):
    """The fallback, as a sync compiles it when discovery says the server does not serve
    MutatingAdmissionPolicy (the backend is told so here: the lab serves it): no mutating
    policy, and the validating one refuses a tier-less Job whose project's tier (nlp:
    exploratory) is not the cluster default, naming the label to set."""
    nlp = Project.objects.get(slug="nlp")
    exploratory = PriorityTier.objects.get(slug="exploratory")
    rules.project_update(project=nlp, user=org.ops, reason=REASON, data={"tier": exploratory})
    connection = replace(truth.sync_connection, namespace_template=truth.template)
    backend = KueueBackend(connection=connection, mutating=False)
    run = services.sync_now(cluster=truth.cluster, user=org.ops, backend=backend)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    # The earlier sync's mutating policies stay (a backend that believes the kind is not
    # served neither lists nor prunes it): removed by hand, as they would not exist there.
    for kind in ("MutatingAdmissionPolicyBinding", "MutatingAdmissionPolicy"):
        for namespace in truth.ns.values():
            truth.client.delete(kind, f"arbiter-tiers-{namespace}")
    enforced = enforcement_for(cluster=truth.cluster, backend=backend, at=timezone.now())
    detail = next(row["detail"] for row in enforced if row["rule"].startswith("nlp: tiers"))
    assert "does not serve MutatingAdmissionPolicy" in detail

    truth.until_policy("nlp", job("x", 1), 422)  # the validation's reason Invalid
    status, message = truth.submit("nlp", job("no-tier", 1))
    assert status == 422, message
    assert (
        "this project's tier is exploratory, not the cluster default regular: set the label "
        "kueue.x-k8s.io/priority-class=exploratory"
    ) in message
    assert truth.submit("nlp", job("named", 1, tier="exploratory"))[0] == 201
    # vision's tier is the cluster default, which Kueue gives a Job naming none: admitted.
    assert truth.submit("vision", job("no-tier", 1))[0] == 201
