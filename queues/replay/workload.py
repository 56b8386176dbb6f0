"""Generated workloads to replay (pure Python, deterministic for a seed).

A workload is a list of :class:`ProjectLoad`, one per project and tier it submits at:

- ``jobs_per_hour``: the mean arrival rate (a Poisson process), shaped by the working day:
  the rate is multiplied by ``1 + daily_swing * cos(2π (hour − 14) / 24)`` (a peak at 14:00
  UTC, a trough at 02:00) and by ``weekend`` on Saturdays and Sundays;
- ``gpus``: the job sizes and their weights (fractions of a GPU allowed);
- ``median_minutes`` and ``sigma``: the duration actually run is log-normal with that median
  and shape (its mean is ``median · exp(sigma² / 2)``), cut at ``max_hours``;
- ``users``: jobs are spread evenly over that many users (``<project>-u<n>``).

:func:`mean_gpu_hours_per_hour` says what load a workload puts on a pool, so callers can size
the rates for a target utilisation (``bench/replay.py`` keeps the load fixed while the job
count grows).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from .rules import Job

HOUR = 3600.0
DAY = 86400.0


@dataclass(frozen=True)
class ProjectLoad:
    project: str
    tier: str
    flavor: str
    jobs_per_hour: float
    gpus: dict[float, float] = field(default_factory=lambda: {1.0: 1.0})
    median_minutes: float = 60.0
    sigma: float = 1.0
    max_hours: float = 72.0
    users: int = 4

    def mean_gpus(self) -> float:
        total = sum(self.gpus.values())
        return sum(size * weight for size, weight in self.gpus.items()) / total

    def mean_hours(self) -> float:
        return min(self.max_hours, self.median_minutes / 60 * math.exp(self.sigma**2 / 2))


def mean_gpu_hours_per_hour(loads: list[ProjectLoad]) -> float:
    """The GPUs a workload keeps busy on average (before any waiting)."""
    return sum(load.jobs_per_hour * load.mean_gpus() * load.mean_hours() for load in loads)


def generate(
    loads: list[ProjectLoad],
    *,
    start: float,
    days: float,
    seed: int = 0,
    daily_swing: float = 0.5,
    weekend: float = 0.5,
    prefix: str = "g",
) -> list[Job]:
    """Jobs arriving in ``[start, start + days)``, in arrival order (ties by project)."""
    if days <= 0:
        raise ValueError("a workload needs a positive number of days")
    if not 0 <= daily_swing < 1 or not 0 < weekend <= 1:
        raise ValueError("daily_swing must be in [0, 1) and weekend in (0, 1]")
    end = start + days * DAY
    peak = 1 + daily_swing
    jobs: list[Job] = []
    for n, load in enumerate(loads):
        if load.jobs_per_hour <= 0:
            continue
        rng = random.Random(f"{seed}:{n}:{load.project}:{load.tier}")
        sizes = list(load.gpus)
        weights = list(load.gpus.values())
        mu = math.log(load.median_minutes * 60)
        rate = load.jobs_per_hour * peak / HOUR  # thinning from the peak rate
        t = start
        count = 0
        cap = load.max_hours * HOUR
        while True:
            t += rng.expovariate(rate)
            if t >= end:
                break
            hour = (t % DAY) / HOUR
            factor = 1 + daily_swing * math.cos(2 * math.pi * (hour - 14) / 24)
            if int(t // DAY + 3) % 7 in (5, 6):  # 1970-01-01 was a Thursday
                factor *= weekend
            if rng.random() * peak > factor:
                continue
            size = rng.choices(sizes, weights)[0]
            duration = min(cap, rng.lognormvariate(mu, load.sigma))
            jobs.append(
                Job(
                    name=f"{prefix}-{load.project}-{load.tier}-{count}",
                    arrival=t,
                    gpus=size,
                    flavor=load.flavor,
                    duration=duration,
                    project=load.project,
                    tier=load.tier,
                    user=f"{load.project}-u{count % max(1, load.users)}",
                )
            )
            count += 1
    jobs.sort(key=lambda job: (job.arrival, job.name))
    return jobs
