"""The slurm.conf multifactor priority lines that express the tiers' aging."""

from __future__ import annotations

from collections.abc import Iterable

from governance.models import PriorityTier


def slurm_conf_lines(tiers: Iterable[PriorityTier]) -> list[str]:
    """The multifactor settings that express the tiers' aging (Arbiter does not edit them).

    Slurm ages every pending job alike: the age factor grows from 0 at submit to 1 at
    ``PriorityMaxAge``. So ``PriorityMaxAge`` is the earliest wait after which a tier ages,
    and ``PriorityWeightAge`` is the smallest raise a tier may get before its cap, in the
    units of ``PriorityWeightQOS`` (which must dominate, see deploy/slurm). Aging never
    preempts: with ``preempt/qos`` only a job's QOS decides what it may preempt.
    """
    tiers = list(tiers)
    top = max((tier.scheduler_value for tier in tiers), default=0)
    aging = [tier for tier in tiers if tier.aging_after_minutes and tier.aging_cap_id]
    lines = ["PriorityType=priority/multifactor", "PriorityWeightQOS=100000"]
    if not aging or not top:
        return [*lines, "PriorityWeightAge=0"]
    weight_qos = 100000
    raises = []
    for tier in aging:
        cap = tier.aging_cap
        room = (cap.scheduler_value - tier.scheduler_value) if cap else 0
        score_gap = max((cap.score - tier.score) if cap else 0, 1)
        step = (tier.aging_step or 0) / score_gap * room
        # Never reach the cap tier's own priority: one point below the gap at most.
        raise_value = max(min(step, room - 1), 0)
        raises.append(int(weight_qos * raise_value / top))
    minutes = min(tier.aging_after_minutes or 0 for tier in aging)
    days, rest = divmod(minutes, 24 * 60)
    return [
        *lines,
        f"PriorityWeightAge={min(raises)}",
        f"PriorityMaxAge={days}-{rest // 60:02d}:{rest % 60:02d}:00",
    ]
