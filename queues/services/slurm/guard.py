"""The guard: what Slurm cannot hold natively, Arbiter holds by requeueing.

Slurm checks a job that asks for untyped GPUs (``--gres=gpu:N``) against the untyped
``gres/gpu`` limits only, wherever it lands, and a tier QOS with a cap replaces the account's
untyped total (measured on 22.05). So an untyped job may run on a GPU type its project has no
quota for, or past its maximum in a capped tier. Typed requests are held natively. The guard
reads the running jobs of Arbiter's project accounts (``squeue --json``), counts what each
account holds per GPU type, and requeues and holds (``scontrol requeuehold``) the newest
untyped jobs that put an account over one of its limits, with a comment saying why. Typed
jobs are never touched.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from .commands import SlurmCommands
from .values import ACCOUNT, GPU, ROOT_ACCOUNT, parse_tres

GUARD_COMMENT = (
    "arbiter guard: untyped gpu request over the project's quota; resubmit with --gres=gpu:<type>:N"
)


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
            key=lambda job: (job.get("start_time", 0), int(job["job_id"])),
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
    """Read the running jobs, requeue-and-hold the untyped ones over a limit; return them."""
    accounts = applied.get(ACCOUNT, {})
    if not accounts:
        return []
    out = commands.run(["squeue", "--json", "-t", "RUNNING"])
    jobs = json.loads(out or "{}").get("jobs", [])
    found = guard_violations(jobs=jobs, accounts=accounts)
    if found:
        ids = ",".join(item["job"] for item in found)
        commands.run(["scontrol", "requeuehold", ids], write=True)
        for item in found:
            commands.run(
                ["scontrol", "update", f"JobId={item['job']}", f"Comment={GUARD_COMMENT}"],
                write=True,
            )
    return found
