"""The guard: what Slurm cannot hold natively, Arbiter holds by requeueing.

Slurm checks a job that asks for untyped GPUs (``--gres=gpu:N``) against the untyped
``gres/gpu`` limits only, wherever it lands, and a tier QOS with a cap replaces the account's
untyped total (measured on 22.05). So an untyped job may run on a GPU type its project has no
quota for, or past its maximum in a capped tier. Typed requests are held natively, and
Arbiter's job_submit plugin (``submit``) rewrites or refuses untyped ones at submit time; the
guard is the backstop for a plugin not installed or a table older than the rules. It reads the
running and pending jobs in squeue's text form (one call; ``--json`` is about 50× slower on a
large queue), then:

* holds (``scontrol hold``) pending untyped GPU jobs of project accounts with typed limits
  before they start (the plugin would have rewritten or refused them);
* requeues and holds (``scontrol requeuehold``) the newest running untyped jobs that put an
  account over one of its limits.

Each held job gets a comment saying why; the caller raises an alert per action. Typed jobs
are never touched.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from queues.schedulers.slurm.values import ACCOUNT, GPU, ROOT_ACCOUNT, parse_tres

from .commands import SlurmCommands

GUARD_COMMENT = (
    "arbiter guard: untyped gpu request over the project's quota; resubmit with --gres=gpu:<type>:N"
)
HOLD_COMMENT = (
    "arbiter guard: held before it starts: untyped gpu request in a project with typed quotas; "
    "resubmit with --gres=gpu:<type>:N"
)
# squeue's text form: one line per job, fields separated by "|" ("N/A" when unset).
SQUEUE_FIELDS = (
    "JobID",
    "StateCompact",
    "Account",
    "tres-alloc",
    "tres-per-job",
    "tres-per-node",
    "tres-per-task",
    "tres-per-socket",
    "StartTime",
)
STATES = {"R": "RUNNING", "PD": "PENDING"}


def read_jobs(commands: SlurmCommands) -> list[dict[str, Any]]:
    """Running and pending jobs from squeue's text form, in the fields the guard reads."""
    out = commands.run(
        ["squeue", "-h", "-t", "R,PD", "-O", ",".join(f"{name}:|" for name in SQUEUE_FIELDS)]
    )
    jobs = []
    for line in out.splitlines():
        values = [v.strip() for v in line.split("|")]
        if len(values) < len(SQUEUE_FIELDS):
            continue
        row = dict(zip(SQUEUE_FIELDS, values, strict=False))
        requests = [
            row[name]
            for name in ("tres-per-job", "tres-per-node", "tres-per-task", "tres-per-socket")
            if row[name] not in ("", "N/A", "(null)")
        ]
        jobs.append(
            {
                "job_id": row["JobID"],
                "job_state": STATES.get(row["StateCompact"], row["StateCompact"]),
                "account": row["Account"],
                "tres_alloc_str": "" if row["tres-alloc"] == "N/A" else row["tres-alloc"],
                "tres_per_node": ",".join(requests),
                "start_time": row["StartTime"],
            }
        )
    return jobs


def _job_key(job: dict[str, Any]) -> tuple:
    head, _sep, task = str(job["job_id"]).partition("_")
    return (str(job.get("start_time", "")), int(head or 0), int(task or 0))


def pending_to_hold(
    *, jobs: list[dict[str, Any]], accounts: dict[str, dict[str, str]]
) -> list[dict[str, str]]:
    """Pending untyped GPU jobs of project accounts whose quota is typed (all of it): they
    could start on a type without quota or past the maximum, so they wait held instead."""
    found = []
    for job in jobs:
        fields = accounts.get(job.get("account", ""))
        if job.get("job_state") != "PENDING" or not fields or not _untyped(job["tres_per_node"]):
            continue
        if fields.get("parent") in ("", "root", ROOT_ACCOUNT):
            continue
        limits = {k: int(v) for k, v in parse_tres(fields.get("grp_tres", "")).items()}
        typed = sum(v for k, v in limits.items() if k.startswith(f"{GPU}:"))
        if any(k.startswith(f"{GPU}:") for k in limits) and limits.get(GPU, 0) <= typed:
            found.append({"job": str(job["job_id"]), "account": job["account"], "over": "held"})
    return found


def _untyped(tres_per_node: str) -> bool:
    """``gres:gpu:2`` / ``gres/gpu:2`` ask for untyped GPUs; ``gres:gpu:a100:2`` does not."""
    for item in tres_per_node.split(","):
        parts = item.replace("gres/", "gres:").split(":")
        if parts[:2] == ["gres", "gpu"] and len(parts) <= 3:
            return True
    return False


def guard_violations(
    *, jobs: list[dict[str, Any]], accounts: dict[str, dict[str, str]]
) -> list[dict[str, str]]:
    """The running untyped jobs to requeue (newest first) so that every project account is
    back within its applied ``GrpTRES``: ``{"job", "account", "over"}`` each."""
    projects = {
        name: {key: int(value) for key, value in parse_tres(fields["grp_tres"]).items()}
        for name, fields in accounts.items()
        if fields.get("parent") not in ("", "root", ROOT_ACCOUNT) and fields.get("grp_tres")
    }
    by_account: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for job in jobs:
        if job.get("job_state") == "RUNNING" and job.get("account") in projects:
            by_account[job["account"]].append(job)
    found = []
    for account, running in sorted(by_account.items()):
        limits = projects[account]
        usage: dict[str, int] = defaultdict(int)
        allocs = {}
        for job in running:
            alloc = {
                key: int(value)
                for key, value in parse_tres(job.get("tres_alloc_str", "")).items()
                if key == GPU or key.startswith(f"{GPU}:")
            }
            allocs[str(job["job_id"])] = alloc
            for key, value in alloc.items():
                usage[key] += value
        excess = {key: usage[key] - limit for key, limit in limits.items() if usage[key] > limit}
        candidates = sorted(
            (job for job in running if _untyped(job.get("tres_per_node", ""))),
            key=_job_key,
            reverse=True,
        )
        for job in candidates:
            alloc = allocs[str(job["job_id"])]
            over = sorted(key for key in alloc if excess.get(key, 0) > 0)
            if not over:
                continue
            for key, value in alloc.items():
                if key in excess:
                    excess[key] -= value
            found.append({"job": str(job["job_id"]), "account": account, "over": ",".join(over)})
    return found


def guard_apply(
    commands: SlurmCommands, *, applied: dict[str, dict[str, dict[str, str]]]
) -> list[dict[str, str]]:
    """Hold pending untyped jobs that could start past a quota, requeue-and-hold the running
    ones over a limit; return each action (``job``, ``account``, ``over``, ``action``)."""
    accounts = applied.get(ACCOUNT, {})
    if not accounts:
        return []
    jobs = read_jobs(commands)
    running = guard_violations(jobs=jobs, accounts=accounts)
    pending = pending_to_hold(jobs=jobs, accounts=accounts)
    for items, verb, comment in (
        (pending, "hold", HOLD_COMMENT),
        (running, "requeuehold", GUARD_COMMENT),
    ):
        if not items:
            continue
        commands.run(["scontrol", verb, ",".join(item["job"] for item in items)], write=True)
        for item in items:
            item["action"] = verb
            commands.run(
                ["scontrol", "update", f"JobId={item['job']}", f"Comment={comment}"], write=True
            )
    return running + pending
