"""Benchmark: the what-if replay engine (``queues.replay``) from 10,000 to 1,000,000 jobs.

Run on demand (not part of the test suite), from the repository root:

    .venv/bin/python bench/replay.py [--sizes 10000,100000,1000000] [--load 0.9]

(under ``nice`` it yields to the machine's other work and its wall clock says more about
that work than about the replay).

The pool: 1,000 GPUs of one flavor; 4 tiers (production may preempt exploratory; regular
ages towards key-project, capped), 20 projects with guarantees summing to 800 GPUs, borrow
and lending limits, reclaim graces, allowed / cautious / forbidden classes, a tier cap on
exploratory work and a per-user cap on production. The workload (``queues.replay.workload``)
keeps the pool at ``--load`` of its capacity on average, so the span grows with the job
count (about 10 days for 10,000 jobs, 1,000 days for 1,000,000): the cost per job stays
comparable. Targets (issue 28): 100,000 jobs ≤ 10 s, 1,000,000 ≤ 100 s.

It times the replay only (generating the workload is timed apart), prints jobs/s with the
load average (the machine may be shared), and writes ``bench/results/replay-<time>.json``.
The replay does no I/O, so its wall clock is its CPU time plus the time it waited for a CPU
while other processes ran: on Linux the kernel's ``/proc/self/schedstat`` gives that wait
(``runqueue_wait_seconds``), so a figure taken on a shared machine says how much of its wall
clock was the machine's other work.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from queues.replay import ClassRule, QuotaRule, Rules, TierRule, replay
from queues.replay.engine import Result
from queues.replay.scheduler_model import SchedulerModel
from queues.replay.slurm_conf import Node, SlurmSettings
from queues.replay.workload import (
    ProjectLoad,
    generate,
    mean_gpu_hours_per_hour,
)

FLAVOR = "main/h100"
CAPACITY = 1000.0
PROJECTS = 20
START = datetime(2026, 1, 5, tzinfo=UTC).timestamp()


def bench_rules() -> Rules:
    tiers = (
        TierRule(
            "production",
            90,
            max_gpus_per_job=64,
            max_gpus_per_user=128,
            may_preempt=True,
            preemptible=frozenset({"exploratory"}),
        ),
        TierRule("key", 70, max_gpus_per_job=64),
        TierRule("regular", 50, aging_after=1800, aging_step=5, aging_cap=65),
        TierRule("exploratory", 10, max_gpus_per_job=16, max_gpus_total=300),
    )
    classes = (
        ClassRule("allowed", "allowed", checkpoint_interval=1800),
        ClassRule("cautious", "cautious", min_runtime=3600, max_per_day=2),
        ClassRule("never", "forbidden"),
    )
    quotas = []
    project_tiers = {}
    for n in range(PROJECTS):
        project = f"p{n:02d}"
        quotas.append(
            QuotaRule(
                project=project,
                flavor=FLAVOR,
                guarantee=40.0,
                borrow_limit=None if n % 4 == 0 else 120.0,
                lending_limit=None if n % 5 else 30.0,
                fair_share_weight=1 + n % 3,
                reclaim_grace=900.0,
                preemption_class=("allowed", "allowed", "cautious", "never")[n % 4],
            )
        )
        project_tiers[project] = ("production", "key", "regular", "regular", "exploratory")[n % 5]
    return Rules(
        capacity={FLAVOR: CAPACITY},
        tiers=tiers,
        classes=classes,
        quotas=tuple(quotas),
        project_tiers=project_tiers,
        default_tier="regular",
        default_class="allowed",
        requeue_cost=120.0,
    )


def bench_loads(rules: Rules) -> list[ProjectLoad]:
    loads = []
    below = {"production": "regular", "key": "regular", "regular": "exploratory"}
    classes = {quota.project: quota.preemption_class for quota in rules.quotas}
    for project, tier in rules.project_tiers.items():
        sizes = {0.5: 1.0, 1.0: 4.0, 2.0: 2.0, 4.0: 2.0, 8.0: 1.0}
        # Never-preempt work never borrows: those projects send what their guarantee holds.
        rate = 0.4 if classes[project] == "never" else 1.0
        loads.append(ProjectLoad(project, tier, FLAVOR, rate, sizes, 90.0, 1.2))
        if tier in below:  # most projects also send lower-tier work
            loads.append(ProjectLoad(project, below[tier], FLAVOR, rate, sizes, 60.0, 1.2))
    return loads


def scaled(loads: list[ProjectLoad], jobs: int, load: float) -> tuple[list[ProjectLoad], float]:
    """Rates for ``load`` of the pool, and the days that hold ``jobs`` jobs at those rates."""
    busy = mean_gpu_hours_per_hour(loads)
    factor = load * CAPACITY / busy
    rates = [
        ProjectLoad(
            p.project,
            p.tier,
            p.flavor,
            p.jobs_per_hour * factor,
            p.gpus,
            p.median_minutes,
            p.sigma,
            p.max_hours,
            p.users,
        )
        for p in loads
    ]
    per_day = sum(p.jobs_per_hour for p in rates) * 24 * (5 + 2 * 0.5) / 7  # the weekly cycle
    return rates, jobs / per_day


def outcome(result: Result) -> str:
    """The digest of everything a replay decided: per job its start, end, preemptions and
    tier, every reason, run, preemption and cancellation (floats by their exact repr). A speed
    step must leave it unchanged (``tests/queues/test_replay_kueue_model.py`` pins it)."""
    parts = (
        result.start,
        result.end,
        result.preemptions,
        result.tiers,
        result.reasons,
        result.runs,
        result.preempted_by,
        sorted(result.cancelled.items()),
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def _schedstat() -> tuple[float, float] | None:
    """(seconds on a CPU, seconds waiting for one) of this process, or None off Linux."""
    try:
        on_cpu, waiting, _slices = Path("/proc/self/schedstat").read_text().split()
    except (OSError, ValueError):
        return None
    return int(on_cpu) / 1e9, int(waiting) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,30000,100000,300000,1000000")
    parser.add_argument("--load", type=float, default=0.9)
    parser.add_argument(
        "--model",
        choices=("engine", "kueue", "slurm"),
        default="engine",
        help="the engine (Kueue's order kept strictly, the default), the Kueue model "
        "(BestEffortFIFO, fair sharing) or the Slurm model (125 nodes of 8 GPUs, the lab's "
        "priority weights, backfill every 30 s, 3-day MaxTime)",
    )
    args = parser.parse_args()
    model = SchedulerModel("kueue") if args.model == "kueue" else None
    if args.model == "slurm":
        nodes = tuple(Node(f"n{i:03d}", {"h100": 8.0}) for i in range(int(CAPACITY) // 8))
        settings = SlurmSettings(
            weight_age=1000,
            weight_fairshare=10000,
            weight_qos=100000,
            calc_period=300,
            nodes=nodes,
            preempt=True,
            preempt_requeue=True,
            max_time=3 * 86400.0,
        )
        model = SchedulerModel("slurm", settings)
    sizes = [int(size) for size in args.sizes.split(",")]
    rules = bench_rules()
    rows = []
    for size in sizes:
        loads, days = scaled(bench_loads(rules), size, args.load)
        began = time.perf_counter()
        jobs = generate(loads, start=START, days=days, seed=size)
        generated = time.perf_counter() - began
        load_before = os.getloadavg()[0]
        sched = _schedstat()
        began = time.perf_counter()
        cpu = time.process_time()
        result = replay(jobs, [(START, rules)], model=model)
        seconds = time.perf_counter() - began
        cpu = time.process_time() - cpu
        after = _schedstat()
        waited = None if sched is None or after is None else after[1] - sched[1]
        started = sum(1 for s in result.start if not math.isnan(s))
        waits = sorted(s - j.arrival for s, j in zip(result.start, jobs, strict=True) if s == s)
        row = {
            "jobs": len(jobs),
            "days": round(days, 1),
            "generate_seconds": round(generated, 2),
            "replay_seconds": round(seconds, 2),
            "replay_cpu_seconds": round(cpu, 2),
            "runqueue_wait_seconds": None if waited is None else round(waited, 2),
            "jobs_per_second": round(len(jobs) / seconds),
            "started": started,
            "preemptions": sum(result.preemptions),
            "reason_changes": len(result.reasons),
            "wait_p50_minutes": round(waits[len(waits) // 2] / 60, 1) if waits else None,
            "wait_p90_minutes": round(waits[int(len(waits) * 0.9)] / 60, 1) if waits else None,
            "utilisation": round(
                1 - result.idle_gpu_seconds[FLAVOR] / (CAPACITY * (result.horizon - result.begin)),
                3,
            ),
            "load_average_before": round(load_before, 2),
            "load_average_after": round(os.getloadavg()[0], 2),
            "digest": outcome(result),
        }
        rows.append(row)
        print(
            f"{row['jobs']:>9,} jobs ({row['days']:>7} days): replay {seconds:7.2f} s "
            f"({row['jobs_per_second']:>7,} jobs/s, CPU {cpu:.2f} s, waited for a CPU "
            f"{row['runqueue_wait_seconds']} s), generate {generated:.2f} s, "
            f"{row['preemptions']:,} preemptions, p50/p90 wait {row['wait_p50_minutes']}/"
            f"{row['wait_p90_minutes']} min, utilisation {row['utilisation']}, "
            f"load average {row['load_average_before']}→{row['load_average_after']}, "
            f"digest {row['digest']}",
            flush=True,
        )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = "replay" if args.model == "engine" else f"replay-{args.model}"
    out = Path(__file__).resolve().parent / "results" / f"{name}-{stamp}.json"
    out.write_text(
        json.dumps(
            {
                "benchmark": "replay",
                "model": args.model,
                "at": stamp,
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "capacity_gpus": CAPACITY,
                "projects": PROJECTS,
                "load": args.load,
                "targets": {"100000": 10, "1000000": 100},
                "note": "the machine is shared with other work; see the load averages and the "
                "time the replay waited for a CPU (runqueue_wait_seconds)",
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"written to bench/results/{out.name}")


if __name__ == "__main__":
    main()
