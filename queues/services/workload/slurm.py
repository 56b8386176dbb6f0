"""The Slurm collector: ``squeue`` (pending and running, with reasons) and ``sacct`` (finished
jobs since a watermark, with their requeues) read as text, mapped back to projects and tiers
through the names the sync compiles, recorded as events.

Text, not ``--json``: on a large queue ``squeue --json`` has been measured at minutes where the
text form takes seconds. Commands run as argument lists through ``SlurmCommands`` (no shell).
Every event id is derived from the job and the time of the change, so reading the same queue
twice stores nothing twice; one lease per cluster keeps two collections of it from
overlapping, and a cluster that does not answer is recorded (and retried by the next beat)
without touching any other cluster.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from governance.models import GpuFlavor, PreemptionClass, PreemptionKind, PriorityTier, Project
from governance.selectors import effective_rules
from queues.models import (
    Cluster,
    ClusterSyncState,
    CollectorState,
    EventKind,
    JobState,
    WorkloadJob,
)
from queues.schedulers.backends import SchedulerError
from queues.schedulers.classify import slurm_reason_token
from queues.schedulers.slurm.values import (
    borrow_qos,
    guarantee_qos,
    parse_tier_qos,
    project_account,
)

from ..slurm import SlurmCommands, commands_for
from .ingest import IngestResult, JobEvent, events_ingest

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


def _job_fields(
    source: str,
    cluster: Cluster,
    names: Names,
    job_id: str,
    account: str,
    qos: str,
    user: str,
    partition: str,
    constraints: str,
    name: str,
    gres: str,
    nodes: str,
) -> dict[str, Any]:
    """What a squeue or sacct row says of its job, with project, tier and flavor mapped."""
    return {
        "source": source,
        "job_id": job_id,
        "scheduler": "slurm",
        "cluster": cluster,
        "account": account,
        "qos": qos,
        "user_name": user,
        "queue": partition,
        "constraints": _null(constraints),
        "name": name,
        **names.describe(account=account, qos=qos, gres=gres, nodes=nodes),
    }


def _epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def squeue_events(
    rows: Iterable[list[str]],
    *,
    source: str,
    cluster: Cluster,
    names: Names,
    known: dict[str, WorkloadJob],
    now: datetime,
    keys: JobKeys | None = None,
) -> list[JobEvent]:
    """Events of the queue's pending, running and suspended jobs (``known``: stored jobs by
    key, to record a pending reason only when it changed)."""
    keys = keys or JobKeys(known.values())
    # Slurm prints whole seconds: an observation at 10:00:00.4 must not come after a start
    # that Slurm prints as 10:00:00, or the start would look older than the wait it ends.
    now = now.replace(microsecond=0)
    events = []
    for row in rows:
        job_id, state, reason, account, qos, user, partition, gres, nodes, features = row[:10]
        submit, start, name = slurm_time(row[10]), slurm_time(row[11]), row[12]
        submit = submit or now
        common = _job_fields(
            source,
            cluster,
            names,
            job_id,
            account,
            qos,
            user,
            partition,
            features,
            name,
            gres,
            nodes,
        )
        key = keys.key(job_id, submit)
        common.update(submitted_at=submit, job_key=key)
        stored = known.get(key)
        events.append(
            JobEvent(event_id=f"{key}:submit", time=submit, kind=EventKind.SUBMITTED, **common)
        )
        if state == "PENDING":
            token = slurm_reason_token(reason)
            if stored is None or stored.state != JobState.PENDING or stored.reason != token:
                events.append(
                    JobEvent(
                        event_id=f"{key}:pending:{token}:{_epoch(now)}",
                        time=max(now, submit),
                        kind=EventKind.PENDING,
                        reason=reason,
                        **common,
                    )
                )
        elif state in RUNNING_LIKE and start is not None:
            events.append(
                JobEvent(
                    event_id=f"{key}:start:{_epoch(start)}",
                    time=start,
                    kind=EventKind.STARTED,
                    **common,
                )
            )
        elif state == "SUSPENDED" and (stored is None or stored.state != JobState.SUSPENDED):
            events.append(
                JobEvent(
                    event_id=f"{key}:suspend:{_epoch(now)}",
                    time=now,
                    kind=EventKind.SUSPENDED,
                    **common,
                )
            )
    return events


def sacct_events(
    rows: list[list[str]],
    *,
    source: str,
    cluster: Cluster,
    names: Names,
    active: set[str],
    keys: JobKeys | None = None,
) -> list[JobEvent]:
    """Events of finished jobs and of each earlier run of requeued jobs (``sacct -D``)."""
    keys = keys or JobKeys([])
    seen: dict[str, int] = {}
    for row in rows:
        seen[row[0]] = seen.get(row[0], 0) + 1
    runs: dict[str, int] = {}
    events = []
    for row in rows:
        job_id, state_text, reason, account, qos, user, partition, tres, constraints = row[:9]
        submit, eligible, start, end = (slurm_time(value) for value in row[9:13])
        exit_code, nodes, name = row[13], row[14], row[15]
        state = state_text.split()[0] if state_text.strip() else ""
        runs[job_id] = runs.get(job_id, 0) + 1
        later_run = runs[job_id] < seen[job_id] or job_id in active
        if submit is None:
            continue
        key = keys.key(job_id, submit)
        if state in ("PENDING", "RUNNING", "REQUEUED") and end is None:
            continue
        common = _job_fields(
            source,
            cluster,
            names,
            job_id,
            account,
            qos,
            user,
            partition,
            constraints,
            name,
            tres,
            nodes,
        )
        common.update(submitted_at=submit, eligible_at=eligible, job_key=key)
        events.append(
            JobEvent(event_id=f"{key}:submit", time=submit, kind=EventKind.SUBMITTED, **common)
        )
        if start is None and _null(reason) and end is not None:
            # Gave up (or was cancelled) while pending: the reason it last waited for.
            events.append(
                JobEvent(
                    event_id=f"{key}:pending:{slurm_reason_token(reason)}:sacct",
                    time=submit,
                    kind=EventKind.PENDING,
                    reason=reason,
                    **common,
                )
            )
        if start is not None:
            events.append(
                JobEvent(
                    event_id=f"{key}:start:{_epoch(start)}",
                    time=start,
                    kind=EventKind.STARTED,
                    **common,
                )
            )
        if end is None:
            continue
        events += _end_events(
            keys, job_id, key, state, end, later_run=later_run, exit_code=exit_code, common=common
        )
    return events


def _end_events(
    keys: JobKeys,
    job_id: str,
    key: str,
    state: str,
    end: datetime,
    *,
    later_run: bool,
    exit_code: str,
    common: dict[str, Any],
) -> list[JobEvent]:
    """How a run ended: preempted, requeued (the job runs again) or finished for good."""
    events: list[JobEvent] = []
    if state == "PREEMPTED":
        events.append(
            JobEvent(
                event_id=f"{key}:preempted:{_epoch(end)}",
                time=end,
                kind=EventKind.PREEMPTED,
                reason="Preempted",
                **common,
            )
        )
    if state == "REQUEUED" or (state in ("PREEMPTED", "NODE_FAIL") and later_run):
        keys.reopen(job_id, key)
        events.append(
            JobEvent(
                event_id=f"{key}:requeue:{_epoch(end)}",
                time=end,
                kind=EventKind.REQUEUED,
                reason=state,
                **common,
            )
        )
    elif state in FINAL or (state == "PREEMPTED" and not later_run):
        if state not in ("PREEMPTED", "NODE_FAIL") or not later_run:
            keys.close(job_id, key)
        events.append(
            JobEvent(
                event_id=f"{key}:end:{_epoch(end)}",
                time=end,
                kind=EventKind.ENDED,
                state=FINAL.get(state, JobState.PREEMPTED),
                exit_code=exit_code,
                **common,
            )
        )
    return events


def _lease(cluster: Cluster, now: datetime) -> str:
    with transaction.atomic():
        CollectorState.objects.get_or_create(cluster=cluster)
        state = CollectorState.objects.select_for_update().get(cluster=cluster)
        if state.lease_token and state.lease_expires_at and state.lease_expires_at > now:
            raise CollectorBusy(str(cluster))
        state.lease_token = uuid.uuid4().hex
        state.lease_expires_at = now + LEASE
        state.last_attempt_at = now
        state.save(update_fields=["lease_token", "lease_expires_at", "last_attempt_at"])
        return state.lease_token


def _finish(cluster: Cluster, token: str, **values: object) -> CollectorState:
    with transaction.atomic():
        state = CollectorState.objects.select_for_update().get(cluster=cluster)
        if state.lease_token == token:
            state.lease_token, state.lease_expires_at = "", None
        for name, value in values.items():
            setattr(state, name, value)
        state.save()
        return state


def collect_cluster(
    *, cluster: Cluster, commands: SlurmCommands | None = None, now: datetime | None = None
) -> CollectResult:
    """Read the cluster's queue and accounting once and record what changed.

    Raises ``CollectorBusy`` when another collection of the cluster holds the lease; a
    scheduler that does not answer gives ``ok=False`` with the error (and is retried by the
    next periodic run), never an exception.
    """
    now = now or timezone.now()
    token = _lease(cluster, now)
    commands = commands or commands_for(cluster)
    state = CollectorState.objects.get(cluster=cluster)
    since = (state.watermark or now - FIRST_LOOKBACK) - OVERLAP
    source = cluster.name
    try:
        queue_rows, sacct_rows = _read(commands, since)
    except SchedulerError as error:
        _finish(
            cluster,
            token,
            last_error=str(error)[:2000],
            failures=state.failures + 1,
        )
        return CollectResult(cluster=source, ok=False, error=str(error))
    names = Names.for_cluster(cluster)
    ids = [row[0] for row in queue_rows]
    stored = list(
        WorkloadJob.objects.filter(
            source=source, job_id__in={*ids, *(row[0] for row in sacct_rows)}
        ).only("pk", "key", "job_id", "submitted_at", "state", "reason")
    )
    keys = JobKeys(stored)
    # Accounting first: it tells a requeued job (same job) from a reused id (a new job).
    events = sacct_events(
        sacct_rows, source=source, cluster=cluster, names=names, active=set(ids), keys=keys
    )
    events += squeue_events(
        queue_rows,
        source=source,
        cluster=cluster,
        names=names,
        known={job.key: job for job in stored},
        now=now,
        keys=keys,
    )
    ingest = events_ingest(events=events)
    result = CollectResult(
        cluster=source,
        ok=True,
        pending=sum(1 for row in queue_rows if row[1] == "PENDING"),
        running=sum(1 for row in queue_rows if row[1] in RUNNING_LIKE),
        finished=sum(1 for row in sacct_rows if row[1].split()[0] in FINAL) if sacct_rows else 0,
        ingest=ingest,
    )
    _finish(
        cluster,
        token,
        watermark=now,
        last_success_at=now,
        last_error="",
        failures=0,
        last_counts=result.as_dict(),
    )
    return result


def _read(commands: SlurmCommands, since: datetime) -> tuple[list[list[str]], list[list[str]]]:
    """The queue's jobs still in play (``squeue``) and the accounting since ``since``
    (``sacct``), as rows of fields; ``SchedulerError`` when the scheduler does not answer."""
    queue = commands.run(["squeue", "-h", "-a", "-t", "all", "-o", SQUEUE_FORMAT])
    accounting = commands.run(
        [
            "sacct",
            "-a",
            "-X",
            "-D",
            "-P",
            "-n",
            "-S",
            since.astimezone().strftime("%Y-%m-%dT%H:%M:%S"),
            "-E",
            "now",
            f"--format={SACCT_FIELDS}",
        ]
    )
    queue_rows = [
        line.split("|", SQUEUE_FIELDS - 1)
        for line in queue.splitlines()
        if line.count("|") >= SQUEUE_FIELDS - 1
    ]
    queue_rows = [
        row
        for row in queue_rows
        if row[1] == "PENDING" or row[1] in RUNNING_LIKE or row[1] == "SUSPENDED"
    ]
    sacct_rows = [
        line.split("|", SACCT_COUNT - 1)
        for line in accounting.splitlines()
        if line.count("|") >= SACCT_COUNT - 1
    ]
    return queue_rows, sacct_rows
