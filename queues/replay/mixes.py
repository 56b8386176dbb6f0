"""Seeded mixed workloads for checking a replay against a real scheduler (no Django).

``mixed_workload(seed)`` draws a small workload a lab scheduler can run in a minute or two:
jobs of several tiers (one project per tier), 1–4 GPUs of either GPU type, runs of
``seconds`` (uniform), arriving in bursts (a share of the jobs around a few instants) and
spread over ``span`` seconds otherwise; a share of the jobs ask for a time limit (whole
minutes, as Slurm's ``--time`` takes them: the run plus a margin, rounded up). The same seed
gives the same jobs. ``bench/replay_fidelity.py`` runs them on the lab's Slurm and Kueue and
replays them; ``fidelity`` compares the two per tier.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TIERS = ("key", "regular", "exploratory")
TYPES = ("a100", "h100")


@dataclass(frozen=True)
class LabJob:
    offset: float  # seconds after the first submission
    gpus: int
    seconds: int
    tier: str
    gpu_type: str
    time_limit_minutes: int | None = None
    # The project it runs in; "" means its tier's (``p-<tier>``, one project per tier).
    in_project: str = ""

    @property
    def project(self) -> str:
        return self.in_project or f"p-{self.tier}"


def mixed_workload(
    seed: int,
    *,
    jobs: int = 20,
    tiers: Sequence[str] = TIERS,
    types: Sequence[str] = TYPES,
    span: float = 30.0,
    seconds: tuple[int, int] = (6, 24),
    bursts: int = 2,
    burst_share: float = 0.5,
    limit_share: float = 0.5,
) -> list[LabJob]:
    rng = random.Random(seed)
    centres = [rng.uniform(0, span) for _ in range(bursts)]
    out = []
    for _ in range(jobs):
        if centres and rng.random() < burst_share:
            offset = min(span, max(0.0, rng.choice(centres) + rng.uniform(-1.0, 1.0)))
        else:
            offset = rng.uniform(0, span)
        run = rng.randint(*seconds)
        limit = math.ceil((run + 10) / 60) if rng.random() < limit_share else None
        out.append(
            LabJob(
                offset=round(offset, 1),
                gpus=rng.choices((1, 2, 3, 4), weights=(4, 3, 1, 2))[0],
                seconds=run,
                tier=rng.choice(list(tiers)),
                gpu_type=rng.choice(list(types)),
                time_limit_minutes=limit,
            )
        )
    return sorted(out, key=lambda job: job.offset)


@dataclass(frozen=True)
class TierError:
    tier: str
    real: float  # median start delay on the real scheduler, seconds
    replayed: float

    @property
    def error(self) -> float:
        return self.replayed - self.real

    @property
    def percent(self) -> float | None:
        return None if self.real == 0 else 100.0 * self.error / self.real

    def within(self, share: float = 0.15, seconds: float = 10.0) -> bool:
        return abs(self.error) <= max(seconds, share * self.real)


def tier_medians(delays: Mapping[str, Sequence[float]]) -> dict[str, float]:
    return {tier: statistics.median(values) for tier, values in delays.items() if values}


def order_agrees(
    real: Mapping[str, float], replayed: Mapping[str, float], tie: float = 2.0
) -> bool:
    """No two tiers in opposite order: a pair counts as ordered only beyond ``tie`` seconds
    (Slurm stamps whole seconds and schedules every second or two)."""
    names = sorted(set(real) & set(replayed))
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            one, two = real[a] - real[b], replayed[a] - replayed[b]
            if (one > tie and two < -tie) or (one < -tie and two > tie):
                return False
            if (abs(one) > tie) != (abs(two) > tie) and abs(one - two) > 2 * tie:
                return False
    return True


def compare(real: Mapping[str, float], replayed: Mapping[str, float]) -> list[TierError]:
    return [TierError(tier, real[tier], replayed.get(tier, math.nan)) for tier in real]
