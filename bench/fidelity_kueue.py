"""Run a seeded mixed workload (``queues.replay.mixes``) on the lab's Kueue, and replay it.

The lab (``deploy/k8s/up.sh``) has no scheduler and no kubelet: Pods never run. What Kueue
decides is observable all the same — when it reserves quota for (admits) a Job's Workload,
its ``QuotaReserved`` condition's time, in whole seconds — and the driver plays the run
itself: it deletes the Job (and so its Workload, which gives its quota back) ``seconds``
after the admission it saw. No Django: plain HTTPS calls with the lab's token.
``KueueLab.setup`` makes ResourceFlavors ``fid-a100`` and ``fid-h100`` (node label
``gpu-type``, which each Job selects), a Cohort ``fid`` holding the lab's 4 + 4 GPUs, per
tier a WorkloadPriorityClass ``fid-<tier>`` (value: the tier's priority) and per project a
namespace (labelled as Arbiter's, so Kueue manages its Jobs), a ClusterQueue in the cohort
(no guarantee: everything is borrowed from the cohort, as a project without a guarantee
does; fair-sharing weight 1) and a LocalQueue; ``teardown`` removes them.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from queues.replay import Job, QuotaRule, Rules, TierRule
from queues.replay.mixes import LabJob

from .fidelity_slurm import FLAVORS, PRIORITIES, Ran

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

    def setup(self, priorities: Mapping[str, int] = PRIORITIES) -> None:
        self.teardown()
        for flavor in FLAVORS:
            spec = {"nodeLabels": {"gpu-type": flavor}}
            self.create(f"{K}/resourceflavors", _obj("ResourceFlavor", f"fid-{flavor}", spec))
        self.create(f"{K}/cohorts", _obj("Cohort", "fid", {"resourceGroups": _group(4)}))
        for tier, value in priorities.items():
            self.create(
                f"{K}/workloadpriorityclasses",
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": f"fid-{tier}"},
                    "value": value,
                },
            )
            ns = f"fid-p-{tier}"
            self.create(
                "/api/v1/namespaces",
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": ns, "labels": {"app.kubernetes.io/managed-by": "arbiter"}},
                },
            )
            queue: dict[str, Any] = {
                "cohortName": "fid",
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "resourceGroups": _group(0),
                "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"},
                "fairSharing": {"weight": "1"},
            }
            self.create(f"{K}/clusterqueues", _obj("ClusterQueue", ns, queue))
            self.create(
                f"{K}/namespaces/{ns}/localqueues",
                _obj("LocalQueue", "q", {"clusterQueue": ns}, namespace=ns),
            )

    def teardown(self, priorities: Mapping[str, int] = PRIORITIES) -> None:
        for tier in priorities:
            ns = f"fid-p-{tier}"
            self.call("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs?propagationPolicy=Background")
            self.call("DELETE", f"{K}/namespaces/{ns}/workloads")
            self.call("DELETE", f"{K}/namespaces/{ns}/localqueues/q")
            self.call("DELETE", f"{K}/clusterqueues/{ns}")
            self.call("DELETE", f"{K}/workloadpriorityclasses/fid-{tier}")
        self.call("DELETE", f"{K}/cohorts/fid")

    def submit(self, workload: Sequence[LabJob]) -> list[Ran]:
        """Create the Jobs at their offsets; delete each its run after Kueue admitted it."""
        began = time.monotonic()
        names = [f"j{i:03d}" for i in range(len(workload))]
        submitted: dict[str, float] = {}
        admitted: dict[str, float] = {}
        seen: dict[str, float] = {}  # when the driver first saw the admission
        ended: dict[str, float] = {}
        workloads: dict[str, str] = {}
        pending = list(zip(names, workload, strict=True))
        deadline = began + 900
        while len(ended) < len(workload) and time.monotonic() < deadline:
            now = time.monotonic()
            while pending and began + pending[0][1].offset <= now:
                name, job = pending.pop(0)
                self.create(f"/apis/batch/v1/namespaces/fid-{job.project}/jobs", _job(name, job))
                submitted[name] = time.time()
            if len(admitted) < len(submitted):
                for n, (at, wl) in self._admissions(workload).items():
                    if n not in admitted:
                        admitted[n] = at
                        seen[n] = time.time()
                        workloads[n] = wl
            for name, job in zip(names, workload, strict=True):
                if (
                    name in admitted
                    and name not in ended
                    and time.time() >= admitted[name] + job.seconds
                ):
                    # The Workload first: its quota is free at once (the Job's deletion
                    # reaches it only through the garbage collector, a second or so later).
                    ns = f"fid-{job.project}"
                    self.call("DELETE", f"{K}/namespaces/{ns}/workloads/{workloads[name]}")
                    self.call(
                        "DELETE",
                        f"/apis/batch/v1/namespaces/{ns}/jobs/{name}?propagationPolicy=Background",
                    )
                    ended[name] = time.time()
            time.sleep(0.2)
        return [
            Ran(
                job,
                name,
                submitted[name],
                admission_estimate(
                    admitted.get(name, float("nan")), submitted[name], seen.get(name)
                ),
                ended.get(name, float("nan")),
                precise=True,  # the start is the estimate, not the whole-second stamp
                stamp=admitted.get(name),
                seen=seen.get(name),
            )
            for name, job in zip(names, workload, strict=True)
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


def _group(gpus: int) -> list[dict[str, Any]]:
    return [
        {
            "coveredResources": [GPU],
            "flavors": [
                {"name": f"fid-{flavor}", "resources": [{"name": GPU, "nominalQuota": str(gpus)}]}
                for flavor in FLAVORS
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
            # As long as it held its quota: the driver deleted it ``seconds`` after the
            # admission's whole-second stamp, so often a little less than ``seconds``.
            duration=max(0.0, r.end - r.start),
            project=r.job.project,
            tier=r.job.tier,
            user="root",
        )
        for r in ran
    ]


def kueue_rules(priorities: Mapping[str, int] = PRIORITIES) -> Rules:
    tiers = tuple(TierRule(slug=tier, score=value // 10) for tier, value in priorities.items())
    quotas = tuple(
        QuotaRule(project=f"p-{tier}", flavor=flavor, guarantee=0.0)
        for tier in priorities
        for flavor in FLAVORS.values()
    )
    return Rules(
        capacity=dict.fromkeys(FLAVORS.values(), 4.0),
        tiers=tiers,
        classes=(),
        quotas=quotas,
        project_tiers={f"p-{tier}": tier for tier in priorities},
    )
