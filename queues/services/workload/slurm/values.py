"""What the collector reads from Slurm and gives back: the squeue and sacct formats, Slurm's
job states, times and GPU requests parsed, the names of projects, tiers and flavors
(``Names``), a job's key (``JobKeys``), and what a collection reports (``CollectResult``)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from governance.models import GpuFlavor, PreemptionClass, PreemptionKind, PriorityTier, Project
from governance.selectors import effective_rules
from queues.models import (
    Cluster,
    ClusterSyncState,
    JobState,
    WorkloadJob,
)
from queues.schedulers.slurm.values import (
    borrow_qos,
    guarantee_qos,
    parse_tier_qos,
    project_account,
)

from ..ingest import IngestResult

SQUEUE_FORMAT = "%i|%T|%r|%a|%q|%u|%P|%b|%D|%f|%V|%S|%j"
SQUEUE_FIELDS = 13
SACCT_FIELDS = (
    "JobID,State,Reason,Account,QOS,User,Partition,ReqTRES,Constraints,"
    "Submit,Eligible,Start,End,ExitCode,NNodes,JobName"
)
SACCT_COUNT = 16
FIRST_LOOKBACK = timedelta(hours=24)
OVERLAP = timedelta(minutes=2)
LEASE = timedelta(minutes=10)

ACTIVE = {"PENDING": JobState.PENDING, "RUNNING": JobState.RUNNING}
RUNNING_LIKE = {"RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING"}
FINAL = {
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    "TIMEOUT": JobState.TIMEOUT,
    "NODE_FAIL": JobState.NODE_FAIL,
    "OUT_OF_MEMORY": JobState.OUT_OF_MEMORY,
    "BOOT_FAIL": JobState.FAILED,
    "DEADLINE": JobState.TIMEOUT,
    "REVOKED": JobState.CANCELLED,
}
GRES = re.compile(r"gpu(?::(?P<type>[A-Za-z0-9_.-]+?))?[:=](?P<count>\d+)(?:\(|$|,)")
TRES_GPU = re.compile(r"gres/gpu(?::(?P<type>[A-Za-z0-9_.-]+))?=(?P<count>\d+)")


class CollectorBusy(Exception):
    pass


@dataclass
class CollectResult:
    cluster: str
    ok: bool
    error: str = ""
    pending: int = 0
    running: int = 0
    finished: int = 0
    ingest: IngestResult = field(default_factory=IngestResult)

    def as_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "error": self.error,
            "pending": self.pending,
            "running": self.running,
            "finished": self.finished,
            **self.ingest.as_dict(),
        }


def slurm_time(value: str) -> datetime | None:
    """Slurm prints the controller's local time without a zone; ``Unknown``/``N/A`` is None."""
    value = value.strip()
    if not value or not value[0].isdigit():
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.astimezone()


def gpus_of(gres: str, nodes: str = "1") -> tuple[int, str]:
    """``gres:gpu:a100:2`` (per node) or ``gres/gpu:a100=2`` → (GPUs in total, type)."""
    total, kind = 0, ""
    for match in TRES_GPU.finditer(gres):
        if match["type"]:
            kind = match["type"]
        else:
            return int(match["count"]), kind
    if kind:
        return sum(int(m["count"]) for m in TRES_GPU.finditer(gres) if m["type"]), kind
    found = GRES.search(gres)
    if found:
        total = int(found["count"]) * max(1, int(nodes) if nodes.isdigit() else 1)
        kind = found["type"] or ""
    return total, kind


def _null(value: str) -> str:
    return "" if value.strip() in {"(null)", "N/A", "None"} else value.strip()


@dataclass
class Names:
    """What the sync compiled, read backwards: account → project, QOS → tier, type → flavor.

    A project's guarantee QOS (and its borrow QOS) carry the priority of the project's
    *effective* tier, grants included, as the last successful sync compiled it: so a job in
    them is filed under that tier (docs/definitions.md), not the project's base tier."""

    accounts: dict[str, Project]
    qos: dict[str, PriorityTier | None]
    flavors: dict[str, GpuFlavor]
    project_tiers: dict[int, PriorityTier | None] = field(default_factory=dict)
    tiers: dict[str, PriorityTier] = field(default_factory=dict)

    @classmethod
    def for_cluster(cls, cluster: Cluster, *, now: datetime | None = None) -> Names:
        tiers = list(PriorityTier.objects.all())
        default = next((tier for tier in tiers if tier.is_default), None)
        projects = list(Project.objects.select_related("tier"))
        compiled_at = (
            ClusterSyncState.objects.filter(cluster=cluster)
            .values_list("applied_at", flat=True)
            .first()
        )
        effective = effective_rules(at=compiled_at or now or timezone.now()).projects
        project_tiers = {
            project.pk: (
                effective[project.slug].tier
                if project.slug in effective
                else project.tier or default
            )
            for project in projects
        }
        accounts: dict[str, Project] = {}
        qos: dict[str, PriorityTier | None] = {}
        classes = list(
            PreemptionClass.objects.filter(kind=PreemptionKind.CAUTIOUS).values_list(
                "slug", flat=True
            )
        )
        for pool in cluster.pools.all():
            qos[borrow_qos(pool)] = None
            for klass in classes:
                qos[borrow_qos(pool, klass.lower())] = None
            for project in projects:
                accounts[project_account(pool, project.slug)] = project
                qos[guarantee_qos(pool, project.slug)] = project_tiers[project.pk]
        flavors = {f.gres_type: f for f in GpuFlavor.objects.exclude(gres_type="")}
        return cls(
            accounts=accounts,
            qos=qos,
            flavors=flavors,
            project_tiers=project_tiers,
            tiers={tier.slug.lower(): tier for tier in tiers},
        )

    def tier_of(self, qos: str) -> tuple[PriorityTier | None, str]:
        """A job QOS's tier and class slug: a pool's borrow and guarantee QOS by name, a
        tier's QOS (its own, a cautious class's copy, the protected copy) through
        ``parse_tier_qos``, the inverse of the names the compiler makes."""
        if qos in self.qos:
            return self.qos[qos], ""
        parsed = parse_tier_qos(qos)
        if parsed is None:
            return None, ""
        slug, klass, _protected = parsed
        return self.tiers.get(slug), klass

    def describe(self, *, account: str, qos: str, gres: str, nodes: str) -> dict[str, Any]:
        project = self.accounts.get(account)
        tier, _klass = self.tier_of(qos)
        if tier is None and project is not None and qos in self.qos:  # the borrow QOS
            tier = self.project_tiers.get(project.pk, project.tier)
        gpus, kind = gpus_of(gres, nodes)
        return {
            "project": project,
            "tier": tier,
            "gpus": gpus,
            "flavor": self.flavors.get(kind),
        }


class JobKeys:
    """Which job a Slurm record belongs to: ``<id>@<submit epoch>``, since Slurm reuses job
    ids after its state is reset.

    A requeued job keeps its job id but Slurm resets its submit time, so a record joins the
    latest job with its id while that job may still run again (pending, running, suspended,
    preempted, or failed with its node); a record whose job id belongs only to finished jobs
    starts a new job.
    """

    OPEN = frozenset(
        {
            JobState.PENDING,
            JobState.RUNNING,
            JobState.SUSPENDED,
            JobState.PREEMPTED,
            JobState.NODE_FAIL,
        }
    )

    def __init__(self, stored: Iterable[WorkloadJob]) -> None:
        # Per job id: [key, submitted_at, still open] of each job, latest submit last.
        self.jobs: dict[str, list[list[Any]]] = {}
        for job in sorted(stored, key=lambda job: (job.submitted_at or EPOCH, job.pk)):
            self.jobs.setdefault(job.job_id, []).append(
                [job.key, job.submitted_at, job.state in self.OPEN]
            )

    def key(self, job_id: str, submit: datetime) -> str:
        exact = f"{job_id}@{_epoch(submit)}"
        lineage = self.jobs.setdefault(job_id, [])
        for entry in lineage:
            if entry[0] == exact:
                return exact
        if lineage:
            latest = lineage[-1]
            if latest[2] and (latest[1] is None or submit >= latest[1]):
                return str(latest[0])
        lineage.append([exact, submit, True])
        return exact

    def close(self, job_id: str, key: str) -> None:
        self._mark(job_id, key, still_open=False)

    def reopen(self, job_id: str, key: str) -> None:
        """A record of an earlier run (requeued, or preempted with a later run): the job goes
        on, even if it is stored as finished since its last run ended, so the next run's
        record joins it on every read, not only on the first."""
        self._mark(job_id, key, still_open=True)

    def _mark(self, job_id: str, key: str, *, still_open: bool) -> None:
        for entry in self.jobs.get(job_id, []):
            if entry[0] == key:
                entry[2] = still_open


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _epoch(moment: datetime) -> int:
    return int(moment.timestamp())
