"""Scoring a lab run against the replay's models, and the stored runs read again (no lab).

``bench/replay_fidelity.py`` runs seeded workloads on the lab and scores them here
(``seed_figures``: per tier the lab's median start delay, each model's, the error, the goal
met or not); what it wrote to ``bench/results/replay_fidelity-*.json`` can be scored again
without a lab: ``rescored`` replays a stored run's jobs with the models as they are now,
``spread`` scores two runs of the same seeds against each other (the lab against itself),
and ``standing`` does both for every stored run at once: where each model stands.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.fidelity_kueue import (
    LAB_TIMEOUT,
    admission_estimate,
    kueue_inputs,
    kueue_rules,
    kueue_settings,
)
from bench.fidelity_slurm import (
    PRIORITIES,
    Ran,
    lab_conf,
    lab_rules,
    model_settings,
    replay_inputs,
)
from bench.kueue_scenarios import SCENARIOS, Scenario
from queues.replay import Job, Rules, replay
from queues.replay.mixes import LabJob, compare, order_agrees, tier_medians
from queues.replay.scheduler_model import SchedulerModel
from queues.replay.slurm_model import SlurmReplay

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


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
            # As long as the lab watched: Kueue, and its model, can preempt in a loop that
            # never ends (a replay in Arbiter stops at its window's end).
            result = replay(inputs, timeline, until=timeline[0][0] + LAB_TIMEOUT, model=model)
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


def kueue_models(scenario: Scenario) -> dict[str, SchedulerModel]:
    return {
        "kueue_model": SchedulerModel(
            "kueue", priorities=scenario.priorities, kueue=kueue_settings(scenario)
        ),
        "strict_order": SchedulerModel("strict"),
    }


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
            "abs_error_seconds": distribution(errs),
            "abs_error_percent": distribution(pcts),
        }
    return out


def distribution(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "median": statistics.median(ordered),
        "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "max": ordered[-1],
    }


def stored_runs(fig: dict[str, Any], *, kueue: bool) -> list[Ran]:
    """A stored seed's jobs as the lab ran them (a Kueue run stored before the driver
    estimated the admission: its whole-second stamp estimated as the replay reads it)."""
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
    if kueue:
        ran = [
            r if r.precise else replace(r, start=admission_estimate(r.start, r.submit)) for r in ran
        ]
    return ran


def slurm_models(conf: str, overrides: dict[str, float]) -> dict[str, SchedulerModel]:
    """The Slurm model with the settings of ``conf`` (the text of the lab's ``slurm.conf``),
    and the strict order."""
    settings = model_settings(conf, {**PRIORITIES, "qos:normal": 0}, **overrides)
    return {
        "slurm_model": SchedulerModel("slurm", settings),
        "strict_order": SchedulerModel("strict"),
    }


class NoSlurmConf(LookupError):
    """A Slurm run stored without its ``slurm.conf``, and no lab's to read."""


def _slurm_conf(stored: dict[str, Any]) -> str:
    """The ``slurm.conf`` a Slurm run ran under: stored with the run (since 7 December 2026),
    else the lab's (``lab_conf``); NoSlurmConf without either."""
    if stored.get("slurm_conf"):
        return str(stored["slurm_conf"])
    conf = lab_conf(ROOT)
    if not conf or not Path(conf).exists():
        raise NoSlurmConf("no slurm.conf stored with the run, and no lab's (deploy/slurm/up.sh)")
    return Path(conf).read_text()


def rescored(path: Path, overrides: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Per seed of an earlier run, its figures with the models as they are now (a Slurm run
    reads the ``slurm.conf`` it ran under: ``_slurm_conf``). ValueError: not a lab run's
    results."""
    try:
        stored = json.loads(path.read_text())
    except ValueError as error:
        raise ValueError(f"{path.name} is not JSON ({error})") from error
    kueue = stored.get("scheduler") == "kueue"
    scenario = SCENARIOS[stored.get("scenario", "default")]
    if kueue:
        models, rules = kueue_models(scenario), kueue_rules(scenario)
    else:
        models, rules = slurm_models(_slurm_conf(stored), overrides or {}), lab_rules()
    figs = []
    try:
        for fig in stored["seeds"]:
            ran = stored_runs(fig, kueue=kueue)
            inputs = kueue_inputs(ran) if kueue else replay_inputs(ran)
            figs.append({"seed": fig["seed"], **seed_figures(ran, inputs, rules, models)})
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{path.name} is not a lab run's results ({error!r})") from error
    return figs


def lab_delays(path: Path) -> dict[int, dict[str, float]]:
    """Per seed of a stored run, the lab's median start delay per tier, read as ``rescored``
    reads it (``stored_runs``)."""
    stored = json.loads(path.read_text())
    kueue = stored.get("scheduler") == "kueue"
    return {fig["seed"]: _delays(stored_runs(fig, kueue=kueue)) for fig in stored["seeds"]}


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


def _counts(figs: list[dict[str, Any]], name: str) -> dict[str, int]:
    return {
        "seeds": len(figs),
        "goal_met": sum(f[name]["goal_met"] for f in figs if name in f),
        "order_agrees": sum(f[name]["order_agrees"] for f in figs if name in f),
    }


def standing(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Per stored run, where the scheduler's model and the strict order stand: as the run
    scored them, and rescored with the models as they are now (None: a Slurm run without
    the lab's ``slurm.conf``). A file that is not a lab run's results is skipped; one whose
    seeds cannot be read is a ValueError (``rescored``)."""
    rows = []
    for path in sorted(paths):
        try:
            stored = json.loads(path.read_text())
            figs = stored["seeds"]
            scheduler = stored["scheduler"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not figs:
            continue
        model = f"{scheduler}_model"
        try:
            now: list[dict[str, Any]] | None = rescored(path)
        except NoSlurmConf:
            now = None
        seeds = [f["seed"] for f in figs]
        rows.append(
            {
                "file": path.name,
                "scheduler": scheduler,
                "scenario": stored.get("scenario", "default"),
                "seeds": f"{min(seeds)}-{max(seeds)}" if len(seeds) > 1 else str(seeds[0]),
                "as_run": {name: _counts(figs, name) for name in (model, "strict_order")},
                "now": None
                if now is None
                else {name: _counts(now, name) for name in (model, "strict_order")},
            }
        )
    return rows
