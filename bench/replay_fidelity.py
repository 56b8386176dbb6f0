"""Benchmark: how close the replay comes to the real scheduler, on seeded mixed workloads.

Run on demand against the lab (not part of the test suite), from the repository root:

    deploy/slurm/up.sh
    .venv/bin/python bench/replay_fidelity.py [--seeds 10] [--first-seed 1] [--jobs 18]

Per seed, ``queues.replay.mixes.mixed_workload(seed)`` (three tiers, one project each, 1–4
GPUs of either type, 5–20 s runs, bursts, half the jobs with a time limit) is submitted to
the lab's Slurm (``bench/fidelity_slurm.py``: one QOS per tier, ``sbatch`` of sleep jobs at
the workload's offsets), and the same jobs — Slurm's submit times, the runs they took, to
the millisecond from slurmctld's log when it has them (else Slurm's whole-second stamps),
and which scheduler started each — are replayed under the same rules twice: with the Slurm
model (``queues.replay.slurm_model``, settings read from the lab's ``slurm.conf``) and with
the engine's Kueue order (the replay before the Slurm model, for comparison). Per tier it
prints the median start delay on Slurm and replayed, the error in seconds and in % of
Slurm's, whether it is within the goal (15 % or 10 s) and whether the tiers are in the same
order (``mixes.order_agrees``); then the distribution of the errors over all seeds, and
writes everything to ``bench/results/replay_fidelity-<time>.json``. ``--rescore FILE``
replays an earlier run's jobs with the models as they are now (no lab; a Slurm run needs the
lab's ``slurm.conf``); ``--standing [FILE ...]`` does that for every stored run (or those
named) and prints, per run, the goal met by the scheduler's model and the strict order as the
run scored them and now, then the totals per scheduler and scenario. The scoring lives in
``bench/fidelity_score.py``. ``--bf-phase``,
``--sched-phase`` and ``--end-delay`` set the Slurm model's pass timing (``SlurmSettings``)
for a sensitivity run. ``--scenario quotas`` (Kueue only) runs the workload under guarantees,
a lending limit and a never-preempt project (``bench/kueue_scenarios.py``) instead of the
default's projects without guarantees; its results file is ``replay_fidelity-kueue-quotas-
<time>.json``, and ``--rescore`` replays it under the same scenario. ``--scenario busy``
scales the replay benchmark's pool (``bench/replay.py``) to the lab: guarantees of 4 of the
5 GPUs per type, fair-sharing weights, a lending limit, a project preempting its own lower
priorities and projects sending two tiers' work; with ``--jobs 50 --run-seconds 10-30
--span 120`` (``--span``: the seconds over which the jobs arrive, 30 by default) it keeps the
pool overloaded for minutes and compares Kueue's preemption count with the model's.
``--spread FIRST SECOND`` scores the lab against itself: each seed of one results file taken
as the prediction of the other file's run of the same seed, and back, by the same goal (no
lab needed): how far two runs of one workload on the same scheduler differ bounds what a
model of it can reach.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fidelity_kueue import KueueLab, kueue_inputs, kueue_rules, lab_env  # noqa: E402
from bench.fidelity_score import (  # noqa: E402
    RESULTS,
    NoSlurmConf,
    kueue_models,
    rescored,
    seed_figures,
    spread,
    standing,
    summary,
)
from bench.fidelity_slurm import (  # noqa: E402
    SlurmLab,
    lab_conf,
    lab_rules,
    lab_settings,
    replay_inputs,
)
from bench.kueue_scenarios import SCENARIOS  # noqa: E402
from queues.replay.mixes import mixed_workload  # noqa: E402
from queues.replay.scheduler_model import SchedulerModel  # noqa: E402


def run_seed(lab: SlurmLab | KueueLab, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    low, high = (int(v) for v in args.run_seconds.split("-"))
    workload = mixed_workload(seed, jobs=args.jobs, seconds=(low, high), span=args.span)
    if isinstance(lab, SlurmLab):
        ran = lab.submit(workload)
        models = {
            "slurm_model": SchedulerModel("slurm", lab_settings(lab, **_overrides(args))),
            "strict_order": SchedulerModel("strict"),
        }
        fig = seed_figures(ran, replay_inputs(ran), lab_rules(), models)
    else:
        # Kueue has no time limits: every job asks for none. Each in its scenario's project.
        scenario = lab.scenario
        ran = lab.submit(
            [scenario.place(replace(job, time_limit_minutes=None)) for job in workload]
        )
        fig = seed_figures(ran, kueue_inputs(ran), kueue_rules(scenario), kueue_models(scenario))
    return {"seed": seed, **fig}


def _print_seed(fig: dict[str, Any]) -> None:
    print(f"seed {fig['seed']} ({fig['jobs']} jobs)")
    names = [name for name in fig if name.endswith(("_model", "_order"))]
    for tier, real in fig["real"].items():
        cells = [f"  {tier:<12} real {real:6.1f} s"]
        for name in names:
            e = fig[name]["errors"][tier]
            pct = "  n/a" if e["percent"] is None else f"{e['percent']:+5.0f}%"
            mark = "ok" if e["within"] else "--"
            cells.append(
                f"{name} {fig[name]['medians'][tier]:6.1f} s ({e['seconds']:+6.1f} s {pct} {mark})"
            )
        print(" | ".join(cells))
    for name in names:
        row = fig[name]
        started = row.get("backfill_started")
        by = (
            f"; started by backfill: Slurm {started['real']}, model {started['model']}, "
            f"same scheduler for {started['same']} of {fig['jobs']} jobs"
            if started
            else ""
        )
        if "preempted" in row:
            by += (
                f"; preempted: Kueue {row['preempted']['real']}, model {row['preempted']['model']}"
            )
        print(f"  {name}: tier order agrees {row['order_agrees']}, goal met {row['goal_met']}{by}")


def _print_spread(first: Path, second: Path, out: dict[str, Any]) -> None:
    for row in out["rows"]:
        tiers = ", ".join(
            f"{tier} {row['first'][tier]:.1f}/{row['second'].get(tier, math.nan):.1f} s"
            for tier in row["first"]
        )
        there, back = row["first_predicts_second"], row["back"]
        print(
            f"seed {row['seed']}: {tiers}; goal met {there['goal_met']} (order "
            f"{there['order_agrees']}, missed {there['missed'] or 'none'}), back {back['goal_met']}"
        )
    print(
        f"{first.name} predicts {second.name}: goal met on {out['first_predicts_second']}/"
        f"{out['seeds']} seeds; back: {out['back']}/{out['seeds']}"
    )


def rescore(path: Path, overrides: dict[str, float]) -> int:
    """The figures of an earlier run's jobs, replayed with today's models."""
    try:
        figs = rescored(path, overrides)
    except (NoSlurmConf, OSError, ValueError) as error:
        print(f"cannot rescore {path.name}: {error}", file=sys.stderr)
        return 1
    for fig in figs:
        _print_seed(fig)
    _print_summary(summary(figs))
    return 0


def _print_standing(rows: list[dict[str, Any]]) -> None:
    """A line per stored run: the goal met, as run and now, by the scheduler's model and the
    strict order; then per scheduler and scenario the totals now (and, apart, as run for the
    runs that could not be rescored). A seed run twice counts twice."""
    totals: dict[tuple[str, str, str], list[int]] = {}
    for row in rows:
        model = f"{row['scheduler']}_model"
        cells = []
        for label, counts in (("as run", row["as_run"]), ("now", row["now"])):
            if counts is None:
                cells.append(f"{label}: not rescored (no slurm.conf)")
                continue
            mine, strict = counts[model], counts["strict_order"]
            cells.append(
                f"{label}: model {mine['goal_met']}/{mine['seeds']} (order "
                f"{mine['order_agrees']}), strict order {strict['goal_met']}/{strict['seeds']}"
            )
        print(f"{row['file']:<50} {row['scenario']:<8} seeds {row['seeds']:<8} " + "; ".join(cells))
        latest = "as run" if row["now"] is None else "now"
        total = totals.setdefault((row["scheduler"], row["scenario"], latest), [0, 0, 0])
        mine = (row["now"] or row["as_run"])[model]
        total[0] += mine["goal_met"]
        total[1] += mine["seeds"]
        total[2] += 1
    for (scheduler, scenario, latest), (met, seeds, files) in sorted(totals.items()):
        kind = "" if latest == "now" else " (not rescored: no slurm.conf)"
        print(
            f"{scheduler} model, {scenario}: goal met {latest} on {met} of {seeds} seed runs "
            f"({files} file{'s' if files > 1 else ''}){kind}"
        )


def _print_summary(total: dict[str, Any]) -> None:
    for name, row in total.items():
        print(
            f"{name}: goal met on {row['seeds_goal_met']}/{row['seeds']} seeds, tier order on "
            f"{row['seeds_order_agrees']}/{row['seeds']}, tiers within 15 %/10 s "
            f"{row['tiers_within']}/{row['tiers']}; |error| s {row['abs_error_seconds']}, "
            f"% {row['abs_error_percent']}"
        )


def _overrides(args: argparse.Namespace) -> dict[str, float]:
    names = ("end_delay", "sched_phase", "bf_phase")
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=18)
    parser.add_argument("--run-seconds", default="5-20", help="runs drawn from LOW-HIGH seconds")
    parser.add_argument(
        "--span", type=float, default=30.0, help="seconds over which the jobs arrive"
    )
    parser.add_argument("--scheduler", choices=("slurm", "kueue"), default="slurm")
    parser.add_argument(
        "--scenario",
        choices=sorted(SCENARIOS),
        default="default",
        help="Kueue only: the projects' quotas (bench/kueue_scenarios.py; default: no guarantees)",
    )
    parser.add_argument(
        "--spread",
        nargs=2,
        metavar=("FIRST", "SECOND"),
        help="the lab against itself: score each seed of one results file as the prediction "
        "of the other's run of that seed, and back (no lab needed)",
    )
    parser.add_argument(
        "--rescore",
        metavar="FILE",
        help="replay the runs of an earlier results file again with the models as they are now "
        "(no lab needed; a Slurm run reads the slurm.conf stored with it, else the lab's)",
    )
    parser.add_argument(
        "--standing",
        nargs="*",
        metavar="FILE",
        help="where each model stands on every stored lab run (or the files named): the goal "
        "met as each run scored it and rescored now (no lab needed)",
    )
    for name, what in (
        ("--end-delay", "seconds from a job's end to its GPUs' return (default: the lab's 0.4)"),
        ("--sched-phase", "where in each sched_interval the main scheduler's pass runs (s)"),
        ("--bf-phase", "where in each bf_interval backfill runs (s)"),
    ):
        parser.add_argument(name, type=float, help=what)
    args = parser.parse_args()
    if args.scenario != "default" and args.scheduler != "kueue":
        parser.error("--scenario needs --scheduler kueue")
    if args.spread:
        first, second = (Path(name) for name in args.spread)
        out = spread(first, second)
        if not out["seeds"]:
            print(f"{first.name} and {second.name} share no seed", file=sys.stderr)
            return 1
        _print_spread(first, second, out)
        return 0
    if args.rescore:
        return rescore(Path(args.rescore), _overrides(args))
    if args.standing is not None:
        paths = [Path(name) for name in args.standing] or sorted(
            RESULTS.glob("replay_fidelity-*.json")
        )
        try:
            rows = standing(paths)
        except ValueError as error:
            print(f"cannot score the stored runs: {error}", file=sys.stderr)
            return 1
        if not rows:
            print(
                "no stored lab run to score (bench/results/replay_fidelity-*.json)", file=sys.stderr
            )
            return 1
        _print_standing(rows)
        return 0
    lab: SlurmLab | KueueLab
    if args.scheduler == "slurm":
        lab = SlurmLab(lab_conf(ROOT))
        why = "no lab Slurm answers (start it with deploy/slurm/up.sh; SLURM_CONF)"
        up = bool(lab.conf) and lab.answers()
    else:
        env = lab_env(ROOT)
        lab = KueueLab(
            env.get("KUBE_API_SERVER", ""),
            env.get("KUBE_CA_FILE", ""),
            env.get("KUBE_TOKEN_FILE", ""),
        )
        why = "no lab Kueue answers (start it with deploy/k8s/up.sh)"
        up = bool(lab.server) and lab.answers()
    if not up:
        print(why, file=sys.stderr)
        return 1
    if isinstance(lab, KueueLab):
        lab.setup(SCENARIOS[args.scenario])
    else:
        lab.setup()
    figs = []
    began = time.monotonic()
    try:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            fig = run_seed(lab, seed, args)
            _print_seed(fig)
            figs.append(fig)
    finally:
        lab.teardown()
    total = summary(figs)
    _print_summary(total)
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    tail = "" if args.scenario == "default" else f"-{args.scenario}"
    path = results / f"replay_fidelity-{args.scheduler}{tail}-{stamp}.json"
    path.write_text(
        json.dumps(
            {
                "scheduler": args.scheduler,
                **({} if args.scenario == "default" else {"scenario": args.scenario}),
                "jobs_per_seed": args.jobs,
                "run_seconds": args.run_seconds,
                "span_seconds": args.span,
                "measured_at": stamp,
                "wall_seconds": time.monotonic() - began,
                "summary": total,
                "seeds": figs,
                # What ``--rescore`` and ``--standing`` read without the lab.
                **({"slurm_conf": Path(lab.conf).read_text()} if isinstance(lab, SlurmLab) else {}),
            },
            indent=1,
        )
    )
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
