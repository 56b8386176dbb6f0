"""Why one job waits, read from the live cluster at the moment of the answer.

Every figure of a Slurm job's wait answer comes from Slurm itself, read in four calls:

* ``scontrol show job -o <id>``: the job's state, reason, account, QOS, asked GPUs (``TRES=``,
  typed and untyped), ``--exclusive`` (``OverSubscribe=NO``), dependency;
* ``scontrol show assoc_mgr flags=assoc,qos``: the account's and the user association's
  limits and use (``GrpTRES=gres/gpu:a100=4(2)``), limits set by hand (``MaxJobs=0``), and
  each QOS of the job's tier: its ``GrpTRES`` share and use (the tier's cap is split over its
  QOS, ``tiercap``), ``MaxTRESPJ`` and ``MaxTRESPU``;
* ``scontrol show node -o``: the GPUs of each type on the nodes that can run jobs
  (``CfgTRES``) and allocated (``AllocTRES``);
* ``squeue`` of the pending jobs with their priorities: the jobs ahead, less those that can
  never start (over their QOS's per-job cap, or asking a type their account has no quota for).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from queues.schedulers.backends import SchedulerError
from queues.schedulers.slurm.values import GPU, parse_tier_qos

from .commands import NO_SUCH_JOBS, SlurmCommands, commands_for

PAIR = re.compile(r"(\S+?)=(\S*)")
LIMIT_USE = re.compile(r"^(?P<limit>N|\d+)?\((?P<used>\d+)\)$")
# Job-count and time limits Arbiter compiles on no account or association: set by hand.
HAND_SET = (
    "GrpJobs",
    "GrpSubmitJobs",
    "MaxJobs",
    "MaxSubmitJobs",
    "MaxJobsAccrue",
    "GrpJobsAccrue",
)
NOT_RUNNABLE = ("DOWN", "DRAIN", "FAIL", "MAINT", "NOT_RESPONDING", "FUTURE", "POWERED_DOWN")
CAN_START = frozenset({"Priority", "Resources", "None", ""})


@dataclass
class Ahead:
    job_id: str
    priority: int
    gpus: int
    gpu_type: str
    reason: str
    qos: str


@dataclass
class LiveWait:
    """What Slurm holds for one pending job, read at one moment."""

    job_id: str
    state: str
    reason: str
    account: str
    user: str
    qos: str
    priority: int
    asked: int
    gpu_type: str  # "" untyped
    exclusive: bool
    dependency: str
    # "gres/gpu" and "gres/gpu:<type>" → (limit or None, in use), as slurmctld holds them.
    account_limits: dict[str, tuple[int | None, int]] = field(default_factory=dict)
    hand_set: list[tuple[str, str, int, int]] = field(default_factory=list)  # where, name, ...
    share: tuple[int | None, int] = (None, 0)  # the job's QOS's gres/gpu GrpTRES
    tier_limit: int | None = None  # the shares of every QOS of the job's tier, together
    tier_used: int = 0
    tier_qos: list[str] = field(default_factory=list)
    per_job: int | None = None
    per_user: tuple[int | None, int] = (None, 0)
    nodes: dict[str, tuple[int, int]] = field(default_factory=dict)  # type → (GPUs, allocated)
    node_types: dict[str, int] = field(default_factory=dict)  # per type on the largest node
    ahead: list[Ahead] = field(default_factory=list)
    ahead_never: int = 0  # pending jobs of higher priority that can never start
    dependency_states: dict[str, str] = field(default_factory=dict)


def _pairs(text: str) -> dict[str, str]:
    return {key: value for key, value in PAIR.findall(text)}


def _limit_use(value: str) -> tuple[int | None, int] | None:
    found = LIMIT_USE.match(value.strip())
    if not found:
        return None
    limit = found["limit"]
    return (None if limit in (None, "N") else int(limit)), int(found["used"])


def _gpu_tres(tres: str) -> dict[str, tuple[int | None, int]]:
    """``cpu=N(0),gres/gpu=2(1),gres/gpu:a100=2(1)`` → the GPU entries as (limit, use)."""
    found = {}
    for item in tres.split(","):
        key, _sep, value = item.partition("=")
        if key == GPU or key.startswith(f"{GPU}:"):
            parsed = _limit_use(value)
            if parsed is not None:
                found[key] = parsed
    return found


def _asked(tres: str) -> tuple[int, str]:
    """The job's GPUs and type from ``TRES=...,gres/gpu=2,gres/gpu:a100=2``."""
    total, kind = 0, ""
    for item in tres.split(","):
        key, _sep, value = item.partition("=")
        if key == GPU and value.isdigit():
            total = int(value)
        elif key.startswith(f"{GPU}:") and value.isdigit() and int(value):
            kind = key.removeprefix(f"{GPU}:")
    return total, kind


def read_job(commands: SlurmCommands, job_id: str) -> dict[str, str] | None:
    out = commands.run(["scontrol", "show", "job", "-o", job_id], tolerate=NO_SUCH_JOBS)
    if NO_SUCH_JOBS.search(out) or not out.strip():
        return None
    return _pairs(out.splitlines()[0])


def _assoc_blocks(out: str) -> list[tuple[str, dict[str, str]]]:
    """``scontrol show assoc_mgr`` as (head line, every key=value of its block)."""
    blocks: list[tuple[str, dict[str, str]]] = []
    for line in out.splitlines():
        if line.startswith(("ClusterName=", "QOS=")):
            blocks.append((line.strip(), _pairs(line)))
        elif blocks and line.startswith(" "):
            blocks[-1][1].update(_pairs(line))
    return blocks


def read_nodes(commands: SlurmCommands) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    """GPUs per type ("" every type) on the nodes that can run jobs, and allocated; and the
    GPUs per type of the node with the most GPUs (what ``--exclusive`` gets)."""
    out = commands.run(["scontrol", "show", "node", "-o"])
    totals: dict[str, list[int]] = {}
    largest: dict[str, int] = {}
    for line in out.splitlines():
        pairs = _pairs(line)
        state = pairs.get("State", "")
        if any(word in state for word in NOT_RUNNABLE):
            continue
        configured = {k: int(v) for k, v in _plain(pairs.get("CfgTRES", "")).items()}
        allocated = {k: int(v) for k, v in _plain(pairs.get("AllocTRES", "")).items()}
        typed = {k: v for k, v in configured.items() if k.startswith(f"{GPU}:")}
        if sum(typed.values()) > sum(largest.values()):
            largest = {k.removeprefix(f"{GPU}:"): v for k, v in typed.items()}
        for key, value in configured.items():
            if key == GPU or key.startswith(f"{GPU}:"):
                kind = key.removeprefix(GPU).removeprefix(":")
                entry = totals.setdefault(kind, [0, 0])
                entry[0] += value
                entry[1] += allocated.get(key, 0)
    return {k: (v[0], v[1]) for k, v in totals.items()}, largest


def _plain(tres: str) -> dict[str, str]:
    found = {}
    for item in tres.split(","):
        key, sep, value = item.partition("=")
        if sep and value.isdigit():
            found[key] = value
    return found


def read_pending(commands: SlurmCommands) -> list[Ahead]:
    out = commands.run(
        ["squeue", "-h", "-t", "PD", "-O", "JobID:|,PriorityLong:|,tres-alloc:|,Reason:|,QOS:|"]
    )
    rows = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 5 or not parts[1].isdigit():
            continue
        gpus, kind = _asked(parts[2])
        rows.append(Ahead(parts[0], int(parts[1]), gpus, kind, parts[3], parts[4]))
    return rows


def live_wait(commands: SlurmCommands, job_id: str) -> LiveWait | None:
    """Everything a wait answer shows, from the cluster (None: Slurm does not know the job)."""
    job = read_job(commands, job_id)
    if job is None:
        return None
    asked, kind = _asked(job.get("TRES", ""))
    account, qos = job.get("Account", ""), job.get("QOS", "")
    user = job.get("UserId", "").partition("(")[0]
    found = LiveWait(
        job_id=job_id,
        state=job.get("JobState", ""),
        reason=job.get("Reason", ""),
        account=account,
        user=user,
        qos=qos,
        priority=int(job.get("Priority", "0") or 0),
        asked=asked,
        gpu_type=kind,
        exclusive=job.get("OverSubscribe", "") == "NO",
        dependency="" if job.get("Dependency", "(null)") == "(null)" else job["Dependency"],
    )
    parsed = parse_tier_qos(qos)
    family = [qos]
    if parsed is not None:
        # Every QOS a tier compiles into shares its cap: read them all (the names the
        # compiler makes for the tier, as far as they exist on the cluster).
        family = sorted({qos, parsed[0], f"{parsed[0]}-protected"})
    # One read of slurmctld's associations (the job's account) and of every QOS.
    blocks = _assoc_blocks(
        commands.run(["scontrol", "show", "assoc_mgr", "flags=assoc,qos", f"accounts={account}"])
    )
    _read_associations(found, blocks)
    _read_qos(found, blocks, parsed[0] if parsed else "", family)
    found.nodes, found.node_types = read_nodes(commands)
    pending = read_pending(commands)
    _read_ahead(found, pending, blocks)
    if found.dependency:
        ids = re.findall(r":(\d+)", found.dependency)
        if ids:
            out = commands.run(
                ["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%i|%T"],
                tolerate=NO_SUCH_JOBS,
            )
            found.dependency_states = dict(
                line.split("|", 1) for line in out.splitlines() if line.count("|") == 1
            )
    return found


def _read_associations(found: LiveWait, blocks: list[tuple[str, dict[str, str]]]) -> None:
    for _head, pairs in blocks:
        if pairs.get("Account") != found.account or "ClusterName" not in pairs:
            continue
        user = pairs.get("UserName", "").partition("(")[0]
        if user and user != found.user:
            continue
        where = f"{user}@{found.account}" if user else found.account
        if not user:
            found.account_limits = _gpu_tres(pairs.get("GrpTRES", ""))
        for name in HAND_SET:
            parsed = _limit_use(pairs.get(name, ""))
            if parsed is not None and parsed[0] is not None:
                found.hand_set.append((where, name, parsed[0], parsed[1]))
        for name in ("MaxTRESPJ", "GrpTRESMins"):
            for key, (limit, used) in _gpu_tres(pairs.get(name, "")).items():
                if limit is not None:
                    found.hand_set.append((where, f"{name} {key}", limit, used))


def _qos_blocks(blocks: list[tuple[str, dict[str, str]]]) -> dict[str, dict[str, str]]:
    found = {}
    for head, pairs in blocks:
        if head.startswith("QOS="):
            found[head.removeprefix("QOS=").partition("(")[0]] = pairs
    return found


def _read_qos(
    found: LiveWait, blocks: list[tuple[str, dict[str, str]]], tier: str, family: list[str]
) -> None:
    qos = _qos_blocks(blocks)
    if tier:
        members = [n for n in qos if (parse_tier_qos(n) or ("",))[0] == tier]
        family = sorted(set(family) | set(members))
    found.tier_qos = [n for n in family if n in qos]
    limits, used = [], 0
    for name in found.tier_qos:
        limit, use = _gpu_tres(qos[name].get("GrpTRES", "")).get(GPU, (None, 0))
        limits.append(limit)
        used += use
        if name == found.qos:
            found.share = (limit, use)
    found.tier_used = used
    found.tier_limit = None if not limits or None in limits else sum(int(v or 0) for v in limits)
    mine = qos.get(found.qos, {})
    found.per_job = _plain_gpu(mine.get("MaxTRESPJ", ""))
    per_user = _gpu_tres(mine.get("MaxTRESPU", "")).get(GPU)
    if per_user is not None and per_user[0] is not None:
        found.per_user = per_user


def _plain_gpu(tres: str) -> int | None:
    """A ``gres/gpu`` limit written plain (``gres/gpu=2``) or with its use (``2(0)``)."""
    value = _plain(tres).get(GPU)
    if value is not None:
        return int(value)
    return _gpu_tres(tres).get(GPU, (None, 0))[0]


def _read_ahead(
    found: LiveWait, pending: list[Ahead], blocks: list[tuple[str, dict[str, str]]]
) -> None:
    """Pending jobs of higher priority that want the same GPU type and could start."""
    qos = _qos_blocks(blocks)
    never = 0
    for other in pending:
        if other.job_id == found.job_id or other.priority <= found.priority or not other.gpus:
            continue
        if found.gpu_type and other.gpu_type and other.gpu_type != found.gpu_type:
            continue
        cap = _plain_gpu(qos.get(other.qos, {}).get("MaxTRESPJ", ""))
        if (cap is not None and other.gpus > cap) or other.gpus > found.nodes.get(
            other.gpu_type, (0, 0)
        )[0]:
            never += 1
            continue
        if other.reason not in CAN_START:
            continue
        found.ahead.append(other)
    found.ahead.sort(key=lambda o: -o.priority)
    found.ahead_never = never


def job_live_wait(job: Any) -> LiveWait | None:
    """What Slurm holds now for a pending job of Arbiter's workload records (``WorkloadJob``),
    or None: not pending, not a job of a Slurm cluster Arbiter syncs, unknown to Slurm, or
    Slurm does not answer (the answer then reads Arbiter's records)."""
    from queues.models import ClusterBackend

    cluster = job.cluster
    if not job.is_pending or cluster is None or not cluster.enabled:
        return None
    if cluster.backend != ClusterBackend.SLURM or job.source != cluster.name:
        return None
    try:
        found = live_wait(commands_for(cluster), job.job_id)
    except SchedulerError:
        return None
    return found if found is not None and found.state == "PENDING" else None
