"""Simple scheduling policies as replay rules, for comparing the engine with published
simulations: FIFO (one tier: arrival order) and shortest-job-first (the duration run known
in advance, as the Helios simulator's SJF knows it).

SJF is expressed with the engine's own rules: each job's tier is its duration's bucket on a
log scale (×1.25 per bucket, 99 buckets cover 1 s to ~4 years), the shorter the higher; within
a bucket, arrival order. One project, no guarantee, no preemption.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from .engine import replay
from .rules import ClassRule, Job, Rules, TierRule

FLAVOR = "pool/gpu"
PROJECT = "all"
BUCKET = 1.25


def _rules(capacity: float, tiers: tuple[TierRule, ...]) -> Rules:
    return Rules(
        capacity={FLAVOR: capacity},
        tiers=tiers,
        classes=(ClassRule("allowed"),),
        project_tiers={PROJECT: tiers[0].slug},
        default_tier=tiers[-1].slug,
        default_class="allowed",
    )


def fifo(jobs: Sequence[Job], capacity: float) -> tuple[list[Job], Rules]:
    tier = TierRule("fifo", 50)
    return [dataclasses.replace(job, tier=tier.slug) for job in jobs], _rules(capacity, (tier,))


def shortest_first(jobs: Sequence[Job], capacity: float) -> tuple[list[Job], Rules]:
    tiers = tuple(TierRule(f"sjf{k}", 100 - k) for k in range(99))

    def bucket(job: Job) -> str:
        return f"sjf{min(98, int(math.log(max(job.duration, 1.0)) / math.log(BUCKET)))}"

    return [dataclasses.replace(job, tier=bucket(job)) for job in jobs], _rules(capacity, tiers)


def philly_jobs(path: Path, vc: str, capacity: float) -> list[Job]:
    """One Philly VC's jobs from the adaptdl trace (``timestamp,duration,num_gpus,...``);
    jobs asking for more GPUs than the VC has are left out (they could never start)."""
    jobs = []
    with gzip.open(path, "rt", newline="") as rows:
        for n, row in enumerate(csv.DictReader(rows)):
            if row.get("cluster") != vc or int(row["num_gpus"]) > capacity:
                continue
            submit = datetime.strptime(row["timestamp"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
            jobs.append(
                Job(
                    name=f"{vc}-{n}",
                    arrival=submit.timestamp(),
                    gpus=float(row["num_gpus"]),
                    flavor=FLAVOR,
                    duration=float(row["duration"]),
                    project=PROJECT,
                )
            )
    return jobs


def averages(jobs: Sequence[Job], capacity: float, policy: str) -> tuple[float, float]:
    """Average job completion time and queueing delay (seconds) under ``fifo`` or ``sjf``."""
    replayed, rules = (fifo if policy == "fifo" else shortest_first)(jobs, capacity)
    result = replay(replayed, [(min(job.arrival for job in jobs), rules)])
    count = len(jobs)
    jct = sum(end - job.arrival for end, job in zip(result.end, jobs, strict=True)) / count
    delay = sum(start - job.arrival for start, job in zip(result.start, jobs, strict=True))
    return jct, delay / count
