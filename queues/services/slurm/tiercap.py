"""One GPU cap per tier across every QOS Arbiter compiles for it.

A tier is compiled into several QOS (``<tier>``, ``<tier>.<class>`` per cautious class,
``<tier>-protected``: ``values.tier_qos_family``), because Slurm carries preemption settings
per QOS. Slurm 22.05 has no limit shared by several QOS (no parent QOS; a job has one QOS and
a partition QOS is per partition), and the job_submit plugin cannot read live usage, so a
``GrpTRES=gres/gpu=<cap>`` on each copy would let the tier run ``cap`` GPUs per copy.

So the cap is *split*: each QOS of a family holds a share as its own ``GrpTRES`` and the
shares never add up to more than the cap (the cap sits in the tier's QOS when nothing runs).
Slurm holds each share natively for every request form (``--gres``, ``--gpus``, per node or
task, arrays, ``srun``, ``salloc``, ``scontrol update``), so the family never holds more than
the cap at any moment. ``rebalance`` moves the free part of the cap to where jobs wait:

1. read each QOS's limit and use (``scontrol show assoc_mgr flags=qos``) and the pending GPU
   jobs of the family (``squeue``), highest priority first;
2. give each QOS its running GPUs, then the free GPUs to whole pending jobs in priority order,
   the rest to the tier's own QOS;
3. lower the shares that shrink first, wait until slurmctld holds them, read the use again,
   and only then raise the others within what is left of the cap.

It runs after every sync and on every guard tick (each minute), so a job in a copy that
finds its share taken waits at most until the next tick while the tier has room.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from queues.schedulers.slurm.values import GPU, cap_families, format_tres, parse_tres

from .commands import SlurmCommands

QOS_BLOCK = re.compile(r"^QOS=(?P<name>\S+?)\(\d+\)\s*$", re.MULTILINE)
SETTLE_SECONDS = 10.0


@dataclass
class Share:
    limit: int | None  # None: no limit on gres/gpu
    used: int


def read_shares(commands: SlurmCommands, names: list[str]) -> dict[str, Share]:
    """Each QOS's ``gres/gpu`` limit and use as slurmctld holds them (one call)."""
    out = commands.run(["scontrol", "show", "assoc_mgr", "flags=qos", f"qos={','.join(names)}"])
    shares: dict[str, Share] = {}
    blocks = list(QOS_BLOCK.finditer(out))
    for index, block in enumerate(blocks):
        end = blocks[index + 1].start() if index + 1 < len(blocks) else len(out)
        body = out[block.end() : end]
        found = re.search(r"GrpTRES=([^\n]*)", body)
        limit, used = None, 0
        if found:
            gpu = re.search(r"(?:^|,)gres/gpu=(N|\d+)\((\d+)\)", found.group(1))
            if gpu:
                limit = None if gpu.group(1) == "N" else int(gpu.group(1))
                used = int(gpu.group(2))
        shares[block["name"]] = Share(limit=limit, used=used)
    return shares


def pending_jobs(commands: SlurmCommands, names: list[str]) -> list[tuple[str, int]]:
    """The family's pending GPU jobs as (QOS, GPUs), highest priority first (one call)."""
    out = commands.run(
        [
            "squeue",
            "-h",
            "-t",
            "PD",
            "-q",
            ",".join(names),
            "--sort=-p",
            "-O",
            "QOS:|,tres-alloc:|,Reason:|",
        ]
    )
    jobs = []
    for line in out.splitlines():
        qos, _sep, rest = line.partition("|")
        tres, _sep, reason = rest.partition("|")
        gpus = int(parse_tres(tres.strip()).get(GPU, "0") or 0)
        # A held job, or one waiting on its dependency, does not need a share yet.
        if gpus and not reason.strip().startswith(("JobHeld", "Dependency")):
            jobs.append((qos.strip(), gpus))
    return jobs


def plan_shares(
    cap: int, names: list[str], shares: dict[str, Share], pending: list[tuple[str, int]]
) -> dict[str, int]:
    """Each QOS's share: its running GPUs, then whole pending jobs in priority order, the
    rest to the tier's own QOS (``names[0]``). Never more than the cap together, unless the
    running GPUs already are (a cap lowered under running jobs): then each keeps its use."""
    target = {name: shares[name].used if name in shares else 0 for name in names}
    free = cap - sum(target.values())
    for qos, gpus in pending:
        if qos in target and 0 < gpus <= free:
            target[qos] += gpus
            free -= gpus
    if free > 0:
        target[names[0]] += free
    return target


def _set(commands: SlurmCommands, name: str, fields: dict[str, str], gpus: int) -> None:
    tres: dict[str, int | str] = {**parse_tres(fields.get("grp_tres", "")), GPU: gpus}
    commands.sacctmgr_write(
        "modify", "qos", "where", f"name={name}", "set", f"GrpTRES={format_tres(tres)}"
    )


def _wait_for(commands: SlurmCommands, names: list[str], want: dict[str, int]) -> dict[str, Share]:
    """Read the shares until slurmctld holds ``want`` (it learns from slurmdbd a moment
    after sacctmgr returns); the last read either way."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        shares = read_shares(commands, names)
        if all(shares.get(n) and shares[n].limit == v for n, v in want.items()):
            return shares
        if time.monotonic() > deadline:
            return shares
        time.sleep(0.1)


def rebalance(commands: SlurmCommands, *, qos: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """Split each capped tier's GPU cap over its QOS by where jobs run and wait; returns
    what changed (``tier``, ``cap``, ``shares`` before and after)."""
    changed = []
    for base, (cap, names) in sorted(cap_families(qos).items()):
        shares = read_shares(commands, names)
        if not all(name in shares for name in names):
            continue  # a QOS not there yet: the sync creates it
        target = plan_shares(cap, names, shares, pending_jobs(commands, names))
        before = {name: shares[name].limit for name in names}
        lower = {n: v for n, v in target.items() if _lowers(before[n], v)}
        for name, gpus in lower.items():
            _set(commands, name, qos[name], gpus)
        if lower:
            shares = _wait_for(commands, names, lower)
        # What the family may hold now: each QOS its limit, or its use where that is more.
        held = {n: max(shares[n].used, _or(shares[n].limit, cap)) for n in names}
        for name in names:
            want = target[name]
            current = shares[name].limit
            if current is not None and want > current:
                room = cap - sum(v for n, v in held.items() if n != name)
                gpus = min(want, room)
                if gpus > current:
                    _set(commands, name, qos[name], gpus)
                    held[name] = max(shares[name].used, gpus)
        if lower or any(before[n] != target[n] for n in names):
            changed.append({"tier": base, "cap": cap, "before": before, "after": target})
    return changed


def _lowers(current: int | None, wanted: int) -> bool:
    return current is None or wanted < current


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def family_split_ok(live: str, desired: str, cap: int) -> bool:
    """A family member's live ``GrpTRES`` is one share of the desired cap: the same TRES
    but ``gres/gpu``, and a share between 0 and the cap."""
    have, want = parse_tres(live), parse_tres(desired)
    share = have.pop(GPU, "")
    want.pop(GPU, None)
    return have == want and share.isdigit() and int(share) <= cap


def normalize_live(desired: dict[str, dict[str, str]], live: dict[str, dict[str, str]]) -> None:
    """Read the live split of each capped tier's family as the desired cap (in place), when
    its shares together stay within the cap: the split is the rebalancer's, not drift. A
    split past the cap (a cap lowered, a share set by hand) stays a difference."""
    for _base, (cap, names) in cap_families(desired).items():
        found = {name: live[name].get("grp_tres", "") for name in names if name in live}
        if len(found) < len(names):
            continue
        if not all(family_split_ok(found[n], desired[n].get("grp_tres", ""), cap) for n in names):
            continue
        total = sum(int(parse_tres(found[n])[GPU]) for n in names)
        if total <= cap:
            for name in names:
                live[name] = {**live[name], "grp_tres": desired[name].get("grp_tres", "")}
