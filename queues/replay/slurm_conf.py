"""What a Slurm replay needs from a cluster's ``slurm.conf``, and Slurm's priority arithmetic.

``SlurmSettings.from_conf(text)`` reads the settings the Slurm model
(``queues.replay.slurm_model``) follows: the multifactor weights (``PriorityWeightAge``,
``PriorityWeightFairshare``, ``PriorityWeightQOS``, ``PriorityMaxAge``,
``PriorityDecayHalfLife``, ``PriorityCalcPeriod``), the scheduler (``SchedulerType``:
``sched/backfill`` or ``sched/builtin``; ``SchedulerParameters``' ``sched_interval``,
``bf_interval``, ``bf_window``, ``bf_resolution``, ``bf_max_job_test``; ``Epilog``: whether
an end runs the main scheduler at once), preemption
(``PreemptType``, ``PreemptMode``; a requeued job may start again ``cred_expire`` + 1 s
later, ``AuthInfo``'s ``cred_expire``), the partition's time limits (``DefaultTime``,
``MaxTime``) and the nodes with their typed GPUs (``NodeName=... Gres=gpu:a100:4,...``).
Pure Python, no Django.

The priority of a pending job is Slurm's multifactor sum (``priority/multifactor``)::

    PriorityWeightAge       * min(eligible for, PriorityMaxAge) / PriorityMaxAge
  + PriorityWeightFairshare * fair-share factor of the job's account
  + PriorityWeightQOS       * QOS priority / the highest QOS priority

(job size, partition, association and TRES factors are not modelled; the lab sets them to 0).
The fair-share factor is Fair Tree's (Slurm's default since 19.05): accounts are ranked by
their level fair share ``S / U`` (normalised shares over normalised decayed usage), the
highest first, ties sharing a rank, and the factor is ``rank / number of accounts``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

INFINITE = math.inf
_DURATION = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def slurm_minutes(text: str) -> float:
    """A Slurm time (``MaxTime``, ``PriorityMaxAge``: minutes, ``M:S``, ``H:M:S``, ``D-H``,
    ``D-H:M``, ``D-H:M:S``, ``INFINITE``/``UNLIMITED``) in seconds."""
    text = text.strip()
    if text.upper() in {"INFINITE", "UNLIMITED", ""}:
        return INFINITE
    found = _DURATION.match(text)
    if not found:
        raise ValueError(f"not a Slurm time: {text!r}")
    days, a, b, c = found.groups()
    if days is not None:  # D-H[:M[:S]]
        return int(days) * 86400.0 + int(a) * 3600.0 + int(b or 0) * 60.0 + int(c or 0)
    if c is not None:  # H:M:S
        return int(a) * 3600.0 + int(b) * 60.0 + int(c)
    if b is not None:  # M:S
        return int(a) * 60.0 + int(b)
    return int(a) * 60.0  # minutes


@dataclass(frozen=True)
class Node:
    name: str
    gpus: Mapping[str, float]  # GRES type -> GPUs


@dataclass(frozen=True)
class SlurmSettings:
    """The Slurm settings a replay follows (defaults: Slurm 22.05's own)."""

    weight_age: float = 0.0
    weight_fairshare: float = 0.0
    weight_qos: float = 0.0
    max_age: float = 7 * 86400.0
    decay_half_life: float = 7 * 86400.0
    calc_period: float = 300.0
    backfill: bool = True
    sched_interval: float = 60.0
    bf_interval: float = 30.0
    bf_window: float = 86400.0
    bf_resolution: float = 60.0
    bf_max_job_test: int = 500
    preempt: bool = False  # preempt/qos
    preempt_requeue: bool = False  # PreemptMode=REQUEUE (else the victim is cancelled)
    requeue_delay: float = 121.0  # cred_expire + 1
    default_time: float = INFINITE
    max_time: float = INFINITE
    nodes: tuple[Node, ...] = ()
    # QOS priority per tier (a tier's Slurm QOS ``Priority``: Arbiter's scheduler value);
    # a tier not named here uses its score.
    qos_priority: Mapping[str, float] = field(default_factory=dict)
    # When Slurm's passes run (seconds). The main scheduler runs a full pass every
    # ``sched_interval`` (slurmctld's background loop, at ``sched_phase`` past each multiple)
    # and, with ``main_at_end``, a pass as soon as an ended job's resources come back; a
    # submission waits for the next pass of either scheduler (a batch job is never started in
    # its submit RPC). Backfill runs every ``bf_interval``, at ``bf_phase`` past each multiple,
    # when something changed since its last pass. The two passes run in separate threads of
    # slurmctld (its background loop, the backfill agent) on their own timers, so they never
    # fall on the same instant: by default the main pass comes half a second after a backfill
    # pass (where both fall relative to the jobs is not knowable: they drift).
    sched_phase: float = 0.5
    bf_phase: float = 0.0
    # An ended job's GPUs are free this much later (the job is "completing" until slurmd has
    # answered slurmctld's terminate request or sent its epilog complete).
    end_delay: float = 0.0
    # Whether the main scheduler runs as soon as an ended job's GPUs are free. Slurm 22.05
    # runs it on an epilog-complete message (``_slurm_rpc_epilog_complete``: ``schedule()``),
    # which slurmd sends only when an ``Epilog`` is configured (and not with ``defer``).
    # Without one, slurmd answers the terminate request "already complete" and slurmctld's
    # agent frees the node and only queues a request (``queue_job_scheduler``), which the
    # background loop serves after ``batch_sched_delay`` (3 s), longer than the periodic
    # pass's ``sched_interval`` on the lab: the freed GPUs wait for the next periodic pass
    # or backfill.
    main_at_end: bool = False

    @classmethod
    def from_conf(cls, text: str, **overrides: object) -> SlurmSettings:
        conf: dict[str, str] = {}
        nodes: list[Node] = []
        partition: dict[str, str] = {}
        for raw in text.splitlines():
            line = raw.split("#", 1)[0].strip()
            if not line or "=" not in line:
                continue
            if line.startswith("NodeName="):
                nodes.append(_node(line))
                continue
            if line.startswith("PartitionName="):
                partition = dict(w.split("=", 1) for w in line.split() if "=" in w)
                continue
            key, _sep, value = line.partition("=")
            conf[key.strip().lower()] = value.strip()
        params_text = conf.get("schedulerparameters", "")
        params = _params(params_text)
        auth = _params(conf.get("authinfo", ""))
        values: dict[str, object] = {
            "weight_age": float(conf.get("priorityweightage", 0)),
            "weight_fairshare": float(conf.get("priorityweightfairshare", 0)),
            "weight_qos": float(conf.get("priorityweightqos", 0)),
            "max_age": slurm_minutes(conf.get("prioritymaxage", "7-0")),
            "decay_half_life": slurm_minutes(conf.get("prioritydecayhalflife", "7-0")),
            "calc_period": slurm_minutes(conf.get("prioritycalcperiod", "5")),
            "backfill": conf.get("schedulertype", "sched/backfill") == "sched/backfill",
            "sched_interval": float(params.get("sched_interval", 60)),
            "bf_interval": float(params.get("bf_interval", 30)),
            "bf_window": float(params.get("bf_window", 1440)) * 60.0,
            "bf_resolution": float(params.get("bf_resolution", 60)),
            "bf_max_job_test": int(params.get("bf_max_job_test", 500)),
            "preempt": conf.get("preempttype", "preempt/none") == "preempt/qos",
            "preempt_requeue": "REQUEUE" in conf.get("preemptmode", "OFF").upper(),
            "requeue_delay": float(auth.get("cred_expire", 120)) + 1.0,
            "default_time": slurm_minutes(partition.get("DefaultTime", "INFINITE")),
            "max_time": slurm_minutes(partition.get("MaxTime", "INFINITE")),
            "nodes": tuple(nodes),
            "main_at_end": bool(conf.get("epilog"))
            and "defer" not in {item.strip().lower() for item in params_text.split(",")},
        }
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]

    def qos_factor(self, tier: str, score: float) -> float:
        top = max(self.qos_priority.values(), default=0.0)
        value = self.qos_priority.get(tier, score)
        return value / top if top > 0 else 0.0

    def time_limit(self, asked: float | None) -> float:
        """A job's time limit: what it asked (at most ``MaxTime``), else ``DefaultTime``, else
        ``MaxTime``."""
        if asked is not None:
            return min(asked, self.max_time)
        return self.default_time if self.default_time < INFINITE else self.max_time


def _params(text: str) -> dict[str, str]:
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


def _node(line: str) -> Node:
    words = dict(w.split("=", 1) for w in line.split() if "=" in w)
    gpus: dict[str, float] = {}
    for spec in words.get("Gres", "").split(","):
        parts = spec.split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        kind, count = (parts[1], parts[2]) if len(parts) >= 3 else ("", parts[1])
        gpus[kind] = gpus.get(kind, 0.0) + float(count.split("(")[0])
    return Node(name=words["NodeName"], gpus=gpus)


def age_factor(waited: float, max_age: float) -> float:
    if waited <= 0:
        return 0.0
    return 1.0 if max_age <= 0 or waited >= max_age else waited / max_age


def fair_tree(shares: Mapping[str, float], usage: Mapping[str, float]) -> dict[str, float]:
    """Fair Tree's fair-share factor of each account (one level): rank by ``S / U``."""
    total_shares = sum(shares.values()) or 1.0
    total_usage = sum(usage.get(name, 0.0) for name in shares)
    level: dict[str, float] = {}
    for name, share in shares.items():
        used = usage.get(name, 0.0) / total_usage if total_usage > 0 else 0.0
        s = share / total_shares
        level[name] = math.inf if used <= 0 else s / used
    ranked = sorted(level, key=lambda name: (-level[name], name))
    n = len(ranked)
    factors: dict[str, float] = {}
    rank = n
    for i, name in enumerate(ranked):
        if i and level[name] != level[ranked[i - 1]]:
            rank = n - i
        factors[name] = rank / n if n else 0.0
    return factors


def decay(usage: float, elapsed: float, half_life: float) -> float:
    if half_life <= 0 or half_life == INFINITE or elapsed <= 0:
        return usage
    return usage * 0.5 ** (elapsed / half_life)


def priority(settings: SlurmSettings, *, waited: float, fairshare: float, qos: float) -> float:
    """Slurm's multifactor priority (truncated to an integer, as Slurm stores it)."""
    return float(
        int(
            settings.weight_age * age_factor(waited, settings.max_age)
            + settings.weight_fairshare * fairshare
            + settings.weight_qos * qos
        )
    )
