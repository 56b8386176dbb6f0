"""Run a seeded mixed workload (``queues.replay.mixes``) on the lab's Kueue, and replay it.

The lab (``deploy/k8s/up.sh``) has no scheduler and no kubelet: Pods never run. What Kueue
decides is observable all the same — when it reserves quota for (admits) a Job's Workload,
its ``QuotaReserved`` condition's time, in whole seconds — and the driver plays the run
itself: it deletes the Job (and so its Workload, which gives its quota back) ``seconds``
after the admission it saw. No Django: plain HTTPS calls with the lab's token.
``KueueLab.setup`` makes ResourceFlavors ``fid-a100`` and ``fid-h100`` (node label
``gpu-type``, which each Job selects), a Cohort ``fid``, per tier a WorkloadPriorityClass
``fid-<tier>`` (value: the tier's priority) and per project a namespace (labelled as
Arbiter's, so Kueue manages its Jobs), a ClusterQueue in the cohort (fair-sharing weight 1)
and a LocalQueue; ``teardown`` removes them. The projects and their quotas are the
``Scenario``'s (``bench/kueue_scenarios.py``), which ``kueue_rules`` turns into the replay's
rules: by default one project per tier with no guarantee (everything borrowed from the
cohort's 4 + 4 GPUs, as a project without a guarantee does).
"""

from __future__ import annotations

import json
import math
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from queues.replay import ClassRule, Job, QuotaRule, Rules, TierRule
from queues.replay.kueue_cohort import ANY, LOWER_PRIORITY, KueueSettings
from queues.replay.kueue_cohort import NEVER as POLICY_NEVER
from queues.replay.mixes import LabJob
from queues.replay.rules import FORBIDDEN

from .fidelity_slurm import FLAVORS, Ran
from .kueue_scenarios import DEFAULT, NEVER, Scenario

# Seconds the driver watches a seed's Jobs from its first submission; a replay of the seed
# stops there too (a Kueue replay, like Kueue, can preempt in a loop that never ends).
LAB_TIMEOUT = 900.0

GPU = "nvidia.com/gpu"
K = "/apis/kueue.x-k8s.io/v1beta2"


def lab_env(root: Path) -> dict[str, str]:
    env = root / "var" / "k8s" / "env"
    if not env.exists():
        return {}
    return dict(line.split("=", 1) for line in env.read_text().splitlines() if "=" in line)


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass
class KueueLab:
    server: str
    ca_file: str
    token_file: str
    scenario: Scenario = DEFAULT  # the quotas ``setup`` made

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        context = ssl.create_default_context(cafile=self.ca_file)
        token = Path(self.token_file).read_text().strip()
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.server + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def answers(self) -> bool:
        try:
            return self.call("GET", f"{K}/clusterqueues")[0] == 200
        except OSError:
            return False

    def create(self, path: str, body: dict[str, Any]) -> None:
        status, out = self.call("POST", path, body)
        if status not in (200, 201, 409):
            raise RuntimeError(f"POST {path}: {status} {out.get('message', out)}")

    def setup(self, scenario: Scenario = DEFAULT) -> None:
        self.scenario = scenario
        self.teardown()
        for flavor in FLAVORS:
            spec = {"nodeLabels": {"gpu-type": flavor}}
            self.create(f"{K}/resourceflavors", _obj("ResourceFlavor", f"fid-{flavor}", spec))
        cohort = {"resourceGroups": _group(scenario.cohort_gpus)}
        self.create(f"{K}/cohorts", _obj("Cohort", "fid", cohort))
        reclaim = "Any" if scenario.reclaim else "Never"
        for tier, value in scenario.priorities.items():
            self.create(
                f"{K}/workloadpriorityclasses",
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": f"fid-{tier}"},
                    "value": value,
                },
            )
            for project in scenario.of_tier(tier):
                ns = f"fid-{project.name}"
                self.create(
                    "/api/v1/namespaces",
                    {
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "metadata": {
                            "name": ns,
                            "labels": {"app.kubernetes.io/managed-by": "arbiter"},
                        },
                    },
                )
                queue: dict[str, Any] = {
                    "cohortName": "fid",
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                    "resourceGroups": _group(
                        project.guarantee,
                        lending=project.lending_limit,
                        borrowing=0 if project.never_preempt else None,
                    ),
                    "preemption": {
                        "withinClusterQueue": "LowerPriority" if project.within else "Never",
                        "reclaimWithinCohort": reclaim,
                    },
                    "fairSharing": {"weight": str(project.weight)},
                }
                self.create(f"{K}/clusterqueues", _obj("ClusterQueue", ns, queue))
                self.create(
                    f"{K}/namespaces/{ns}/localqueues",
                    _obj("LocalQueue", "q", {"clusterQueue": ns}, namespace=ns),
                )

    def teardown(self) -> None:
        """The scenario's objects, then any other ClusterQueue left in the cohort (an earlier
        scenario's), then the cohort."""
        done = set()
        for tier in self.scenario.priorities:
            for project in self.scenario.of_tier(tier):
                self._remove_queue(f"fid-{project.name}")
                done.add(f"fid-{project.name}")
            self.call("DELETE", f"{K}/workloadpriorityclasses/fid-{tier}")
        status, body = self.call("GET", f"{K}/clusterqueues")
        for item in body.get("items", []) if status == 200 else []:
            name = item["metadata"]["name"]
            if item.get("spec", {}).get("cohortName") == "fid" and name not in done:
                self._remove_queue(name)
        self.call("DELETE", f"{K}/cohorts/fid")

    def _remove_queue(self, ns: str) -> None:
        self.call("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs?propagationPolicy=Background")
        self.call("DELETE", f"{K}/namespaces/{ns}/workloads")
        self.call("DELETE", f"{K}/namespaces/{ns}/localqueues/q")
        self.call("DELETE", f"{K}/clusterqueues/{ns}")

    def conditions(self, project: str, job: str) -> list[dict[str, Any]]:
        """The status conditions of the Workload of Job ``job`` (none if it has none)."""
        status, body = self.call("GET", f"{K}/namespaces/fid-{project}/workloads")
        for item in body.get("items", []) if status == 200 else []:
            owners = [o.get("name") for o in item["metadata"].get("ownerReferences", [])]
            if job in owners:
                return list(item.get("status", {}).get("conditions", []))
        return []

    def submit(self, workload: Sequence[LabJob], timeout: float = LAB_TIMEOUT) -> list[Ran]:
        """Create the Jobs at their offsets; delete each its run after Kueue admitted it.

        When the scenario reclaims (a project has a guarantee), the driver watches the
        admitted Jobs too: one whose quota reservation Kueue took back (evicted: preempted)
        runs its whole run again after its next admission, as the replay's preempted jobs
        lose all their work. Jobs not ended after ``timeout`` seconds are left as they are
        (``teardown`` removes them): a start or end never seen is NaN."""
        began = time.monotonic()
        names = [f"j{i:03d}" for i in range(len(workload))]
        track = _Track(watch=self.scenario.reclaim)
        pending = list(zip(names, workload, strict=True))
        deadline = began + timeout
        while len(track.ended) < len(workload) and time.monotonic() < deadline:
            now = time.monotonic()
            while pending and began + pending[0][1].offset <= now:
                name, job = pending.pop(0)
                self.create(f"/apis/batch/v1/namespaces/fid-{job.project}/jobs", _job(name, job))
                track.submitted[name] = time.time()
            if len(track.admitted) < len(track.submitted) or (
                track.watch and len(track.ended) < len(track.submitted)
            ):
                track.saw(self._admissions(workload))
            for name, job in zip(names, workload, strict=True):
                run = track.runs.get(name)
                if run is not None and name not in track.ended and time.time() >= run + job.seconds:
                    # The Workload first: its quota is free at once (the Job's deletion
                    # reaches it only through the garbage collector, a second or so later).
                    ns = f"fid-{job.project}"
                    self.call("DELETE", f"{K}/namespaces/{ns}/workloads/{track.workloads[name]}")
                    self.call(
                        "DELETE",
                        f"/apis/batch/v1/namespaces/{ns}/jobs/{name}?propagationPolicy=Background",
                    )
                    track.ended[name] = time.time()
            time.sleep(0.2)
        return [
            track.ran(name, job)
            for name, job in zip(names, workload, strict=True)
            if name in track.submitted
        ]

    def _admissions(self, workload: Sequence[LabJob]) -> dict[str, tuple[float, str]]:
        """Per Job name, when Kueue reserved quota for its Workload (admitted it), and the
        Workload's name."""
        out = {}
        for project in sorted({job.project for job in workload}):
            status, body = self.call("GET", f"{K}/namespaces/fid-{project}/workloads")
            if status != 200:
                continue
            for item in body.get("items", []):
                owners = [o.get("name") for o in item["metadata"].get("ownerReferences", [])]
                for cond in item.get("status", {}).get("conditions", []):
                    if cond["type"] == "QuotaReserved" and cond["status"] == "True" and owners:
                        at = _stamp(cond["lastTransitionTime"])
                        out[owners[0]] = (at, item["metadata"]["name"])
        return out


@dataclass
class _Track:
    """What the driver saw of each Job (by name): times are the clock's (``time.time``)."""

    watch: bool  # evictions too (the scenario reclaims), not only the first admissions
    submitted: dict[str, float] = field(default_factory=dict)
    admitted: dict[str, float] = field(default_factory=dict)  # the first admission's stamp
    seen: dict[str, float] = field(default_factory=dict)  # when the driver first saw it
    ended: dict[str, float] = field(default_factory=dict)
    workloads: dict[str, str] = field(default_factory=dict)
    runs: dict[str, float] = field(default_factory=dict)  # the admission stamp of its run
    last: dict[str, tuple[float, float]] = field(default_factory=dict)  # after an eviction
    preempted: dict[str, int] = field(default_factory=dict)

    def saw(self, admissions: dict[str, tuple[float, str]]) -> None:
        now = time.time()
        for name, (at, workload) in admissions.items():
            if name not in self.admitted:
                self.admitted[name], self.seen[name] = at, now
                self.workloads[name], self.runs[name] = workload, at
            elif self.watch and name not in self.ended and self.runs.get(name) != at:
                if name in self.runs:  # evicted and admitted again between two looks
                    self.preempted[name] = self.preempted.get(name, 0) + 1
                self.runs[name], self.last[name] = at, (at, now)
        if self.watch:
            for name in [n for n in self.runs if n not in admissions and n not in self.ended]:
                del self.runs[name]  # evicted: its quota reservation taken back
                self.preempted[name] = self.preempted.get(name, 0) + 1

    def ran(self, name: str, job: LabJob) -> Ran:
        submitted, stamp, last = self.submitted[name], self.admitted.get(name), self.last.get(name)
        return Ran(
            job,
            name,
            submitted,
            admission_estimate(
                math.nan if stamp is None else stamp, submitted, self.seen.get(name)
            ),
            self.ended.get(name, math.nan),
            precise=True,  # the start is the estimate, not the whole-second stamp
            stamp=stamp,
            seen=self.seen.get(name),
            last=None if last is None else admission_estimate(last[0], submitted, last[1]),
            preempted=self.preempted.get(name, 0),
        )


def admission_estimate(stamp: float, submitted: float, seen: float | None = None) -> float:
    """When Kueue admitted a Workload: its ``QuotaReserved`` time is stamped in whole seconds
    (truncated), so the admission lies in ``[stamp, stamp + 1)``, not before the Job's
    submission and not after the driver first saw it; the middle of that interval."""
    low = max(stamp, submitted)
    high = stamp + 1.0 if seen is None else min(stamp + 1.0, seen)
    return (low + max(low, high)) / 2


def _obj(kind: str, name: str, spec: dict[str, Any], namespace: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": meta, "spec": spec}


def _group(gpus: int, lending: int | None = None, borrowing: int | None = None) -> list[Any]:
    resource: dict[str, str] = {"name": GPU, "nominalQuota": str(gpus)}
    if borrowing is not None:
        resource["borrowingLimit"] = str(borrowing)
    if lending is not None:
        resource["lendingLimit"] = str(lending)
    return [
        {
            "coveredResources": [GPU],
            "flavors": [
                {"name": f"fid-{flavor}", "resources": [dict(resource)]} for flavor in FLAVORS
            ],
        }
    ]


def _job(name: str, job: LabJob) -> dict[str, Any]:
    gpu = {GPU: str(job.gpus)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {
                "kueue.x-k8s.io/queue-name": "q",
                "kueue.x-k8s.io/priority-class": f"fid-{job.tier}",
            },
        },
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    # The flavor a Job asks for: a node selector Kueue matches to the flavor.
                    "nodeSelector": {"gpu-type": job.gpu_type},
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["sleep", str(job.seconds)],
                            "resources": {"requests": gpu, "limits": gpu},
                        }
                    ],
                }
            },
        },
    }


def kueue_inputs(ran: Sequence[Ran]) -> list[Job]:
    return [
        Job(
            name=r.slurm_id,
            arrival=r.submit,
            gpus=float(r.job.gpus),
            flavor=FLAVORS[r.job.gpu_type],
            # As long as its last run held its quota: the driver deleted it ``seconds`` after
            # the admission's whole-second stamp, so often a little less than ``seconds``.
            # (A Job never admitted, or not ended when the driver stopped: its run asked.)
            duration=float(r.job.seconds)
            if math.isnan(r.end)
            else max(0.0, r.end - (r.start if r.last is None else r.last)),
            project=r.job.project,
            tier=r.job.tier,
            user="root",
        )
        for r in ran
    ]


def kueue_rules(scenario: Scenario = DEFAULT) -> Rules:
    """The replay's rules from the scenario the lab was set up with (``KueueLab.setup``)."""
    priorities = scenario.priorities
    tiers = tuple(TierRule(slug=tier, score=value // 10) for tier, value in priorities.items())
    quotas = tuple(
        QuotaRule(
            project=project.name,
            flavor=flavor,
            guarantee=float(project.guarantee),
            lending_limit=None if project.lending_limit is None else float(project.lending_limit),
            preemption_class=NEVER if project.never_preempt else "",
            fair_share_weight=float(project.weight),
        )
        for tier in priorities
        for project in scenario.of_tier(tier)
        for flavor in FLAVORS.values()
    )
    never = any(project.never_preempt for project in scenario.projects)
    return Rules(
        capacity=dict.fromkeys(FLAVORS.values(), float(scenario.gpus)),
        tiers=tiers,
        classes=(ClassRule(NEVER, FORBIDDEN),) if never else (),
        quotas=quotas,
        project_tiers={project.name: project.tier for project in scenario.projects},
    )


def kueue_settings(scenario: Scenario = DEFAULT) -> KueueSettings:
    """The ClusterQueues' preemption as ``KueueLab.setup`` writes it (the lab's Kueue runs
    with fair sharing on, Arbiter's configuration): ``reclaimWithinCohort`` ``Any`` for every
    queue when a project has a guarantee (else ``Never``), ``withinClusterQueue``
    ``LowerPriority`` for a project marked so (else ``Never``)."""
    reclaim = ANY if scenario.reclaim else POLICY_NEVER
    names = [project.name for project in scenario.projects]
    return KueueSettings(
        reclaim=dict.fromkeys(names, reclaim),
        within={p.name: LOWER_PRIORITY if p.within else POLICY_NEVER for p in scenario.projects},
    )
