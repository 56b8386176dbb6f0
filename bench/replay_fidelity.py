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
replays an earlier run's jobs with the models as they are now (no lab); ``--bf-phase``,
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
import statistics
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fidelity_kueue import (  # noqa: E402
    KueueLab,
    admission_estimate,
    kueue_inputs,
    kueue_rules,
    kueue_settings,
    lab_env,
)
from bench.fidelity_slurm import (  # noqa: E402
    PRIORITIES,
    Ran,
    SlurmLab,
    lab_conf,
    lab_rules,
    lab_settings,
    model_settings,
    replay_inputs,
)
from bench.kueue_scenarios import SCENARIOS, Scenario  # noqa: E402
from queues.replay import Job, Rules, replay  # noqa: E402
from queues.replay.mixes import LabJob, compare, mixed_workload, order_agrees, tier_medians  # noqa: E402
from queues.replay.scheduler_model import SchedulerModel  # noqa: E402
from queues.replay.slurm_model import SlurmReplay  # noqa: E402


def _delays(ran: list[Ran], starts: list[float] | None = None) -> dict[str, float]:
    by_tier: dict[str, list[float]] = {}
    for i, r in enumerate(ran):
        start = r.start if starts is None else starts[i]
        by_tier.setdefault(r.job.tier, []).append(start - r.submit)
    return tier_medians(by_tier)


def seed_figures(
    ran: list[Ran], inputs: list[Job], rules: Rules, models: dict[str, SchedulerModel]
) -> dict[str, Any]:
    """The real delays per tier and, per model, the replayed ones and their errors."""
    timeline = [(min(job.arrival for job in inputs), rules)]
    real = _delays(ran)
    out: dict[str, Any] = {"jobs": len(ran), "real": real}
    for name, model in models.items():
        by: list[str] = []
        preempted: dict[str, int] = {}
        if model.scheduler == "slurm" and model.slurm is not None:
            slurm = SlurmReplay(inputs, timeline, model.slurm)
            starts = slurm.run().start
            by = slurm.started_by
        else:
            result = replay(inputs, timeline, model=model)
            starts = result.start
            # Kueue's evictions (reclaims of a guarantee) and the model's preemptions.
            preempted = {"real": sum(r.preempted for r in ran), "model": sum(result.preemptions)}
        replayed = _delays(ran, starts)
        errors = compare(real, replayed)
        agrees = order_agrees(real, replayed)
        out[name] = {
            "medians": replayed,
            "errors": {
                e.tier: {"seconds": e.error, "percent": e.percent, "within": e.within()}
                for e in errors
            },
            "order_agrees": agrees,
            "goal_met": agrees and all(e.within() for e in errors),
        }
        if any(preempted.values()):
            out[name]["preempted"] = preempted
        if by and all(r.started_by for r in ran):
            # Which scheduler started each job: Slurm's (its log) and the model's.
            out[name]["backfill_started"] = {
                "real": sum(r.started_by == "backfill" for r in ran),
                "model": by.count("backfill"),
                "same": sum(r.started_by == b for r, b in zip(ran, by, strict=True)),
            }
    out["runs"] = [
        {
            "id": r.slurm_id,
            "tier": r.job.tier,
            "type": r.job.gpu_type,
            "gpus": r.job.gpus,
            "seconds": r.job.seconds,
            "limit_min": r.job.time_limit_minutes,
            "submit": r.submit,
            "start": r.start,
            "end": r.end,
            "by": r.started_by,
            "precise": r.precise,
            **({} if r.stamp is None else {"stamp": r.stamp, "seen": r.seen}),
            **({} if r.job.in_project == "" else {"project": r.job.project}),
            **({} if not r.preempted else {"preempted": r.preempted, "last": r.last}),
        }
        for r in ran
    ]
    return out


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
        fig = seed_figures(ran, kueue_inputs(ran), kueue_rules(scenario), _kueue_models(scenario))
    return {"seed": seed, **fig}


def _kueue_models(scenario: Scenario) -> dict[str, SchedulerModel]:
    return {
        "kueue_model": SchedulerModel(
            "kueue", priorities=scenario.priorities, kueue=kueue_settings(scenario)
        ),
        "strict_order": SchedulerModel("strict"),
    }


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


def summary(figs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in [name for name in figs[0] if name.endswith(("_model", "_order"))] if figs else []:
        errs = [abs(e["seconds"]) for f in figs for e in f[name]["errors"].values()]
        pcts = [
            abs(e["percent"])
            for f in figs
            for e in f[name]["errors"].values()
            if e["percent"] is not None
        ]
        out[name] = {
            "seeds": len(figs),
            "seeds_goal_met": sum(f[name]["goal_met"] for f in figs),
            "seeds_order_agrees": sum(f[name]["order_agrees"] for f in figs),
            "tiers_within": sum(e["within"] for f in figs for e in f[name]["errors"].values()),
            "tiers": len(errs),
            "abs_error_seconds": _spread(errs),
            "abs_error_percent": _spread(pcts),
        }
    return out


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "median": statistics.median(ordered),
        "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "max": ordered[-1],
    }


def rescore(path: Path, scheduler: str, overrides: dict[str, float]) -> int:
    """The figures of an earlier run's jobs, replayed with today's models."""
    stored = json.loads(path.read_text())
    scenario = SCENARIOS[stored.get("scenario", "default")]
    figs = []
    for fig in stored["seeds"]:
        ran = [
            Ran(
                LabJob(
                    0.0,
                    r["gpus"],
                    r.get("seconds", 0),
                    r["tier"],
                    r["type"],
                    r["limit_min"],
                    r.get("project", ""),
                ),
                r["id"],
                r["submit"],
                r["start"],
                r["end"],
                r.get("by", ""),
                r.get("precise", False),
                r.get("stamp"),
                r.get("seen"),
                r.get("last"),
                r.get("preempted", 0),
            )
            for r in fig["runs"]
        ]
        if scheduler == "kueue":
            # Runs stored before the driver estimated the admission: the whole-second stamp.
            ran = [
                r if r.precise else replace(r, start=admission_estimate(r.start, r.submit))
                for r in ran
            ]
        if scheduler == "slurm":
            lab = SlurmLab(lab_conf(ROOT))
            settings = model_settings(
                Path(lab.conf).read_text(), {**PRIORITIES, "qos:normal": 0}, **overrides
            )
            models = {
                "slurm_model": SchedulerModel("slurm", settings),
                "strict_order": SchedulerModel("strict"),
            }
            figs.append(
                {"seed": fig["seed"], **seed_figures(ran, replay_inputs(ran), lab_rules(), models)}
            )
        else:
            rules = kueue_rules(scenario)
            figs.append(
                {
                    "seed": fig["seed"],
                    **seed_figures(ran, kueue_inputs(ran), rules, _kueue_models(scenario)),
                }
            )
        _print_seed(figs[-1])
    _print_summary(summary(figs))
    return 0


def lab_delays(path: Path) -> dict[int, dict[str, float]]:
    """Per seed of a stored run, the lab's median start delay per tier, read as ``rescore``
    reads it (a Kueue run's admissions stamped in whole seconds estimated)."""
    stored = json.loads(path.read_text())
    kueue = stored.get("scheduler") == "kueue"
    out: dict[int, dict[str, float]] = {}
    for fig in stored["seeds"]:
        by_tier: dict[str, list[float]] = {}
        for r in fig["runs"]:
            start = r["start"]
            if kueue and not r.get("precise", False):
                start = admission_estimate(start, r["submit"])
            by_tier.setdefault(r["tier"], []).append(start - r["submit"])
        out[fig["seed"]] = tier_medians(by_tier)
    return out


def spread(first: Path, second: Path) -> dict[str, Any]:
    """The lab against itself: each seed of one stored run taken as the prediction of the
    other run of the same seed, and back, scored as a model is (every tier within 15 % or
    10 s, the same tier order). What a model can reach is bounded by it."""
    a, b = lab_delays(first), lab_delays(second)
    seeds = sorted(set(a) & set(b))
    rows = []
    for seed in seeds:
        row: dict[str, Any] = {"seed": seed, "first": a[seed], "second": b[seed]}
        for name, real, guess in (
            ("first_predicts_second", b[seed], a[seed]),
            ("back", a[seed], b[seed]),
        ):
            errors = compare(real, guess)
            agrees = order_agrees(real, guess)
            row[name] = {
                "goal_met": agrees and all(e.within() for e in errors),
                "order_agrees": agrees,
                "missed": {e.tier: round(e.error, 1) for e in errors if not e.within()},
            }
        rows.append(row)
    return {
        "seeds": len(rows),
        "first_predicts_second": sum(r["first_predicts_second"]["goal_met"] for r in rows),
        "back": sum(r["back"]["goal_met"] for r in rows),
        "rows": rows,
    }


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
        "(no lab needed; the lab's slurm.conf is read for the Slurm model)",
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
        return rescore(Path(args.rescore), args.scheduler, _overrides(args))
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
            },
            indent=1,
        )
    )
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
