"""Where each model stands on the stored lab runs (``bench/replay_fidelity.py --standing``):
each run's goal count as it scored it, and rescored with the models as they are now."""

import json
import sys
from pathlib import Path
from typing import Any

from bench.fidelity_score import RESULTS, rescored, standing
from bench.replay_fidelity import main
from queues.replay import kueue_model


def _job(name: str, tier: str, gpus: int, submit: float, start: float, run: float) -> dict:
    """A job of a stored Kueue run (the default scenario: its tier's project, A100)."""
    return {
        "id": name,
        "tier": tier,
        "type": "a100",
        "gpus": gpus,
        "seconds": int(run),
        "limit_min": None,
        "submit": submit,
        "start": start,
        "end": start + run,
        "precise": True,
    }


def _scored(goal_met: bool) -> dict[str, Any]:
    return {"goal_met": goal_met, "order_agrees": goal_met}


def _kueue_run(path: Path) -> Path:
    """Seed 1: the regular job waits for the key job's 4 GPUs, on the lab and in the model.
    Seed 2: the lab held the regular job 39 s on a free pool, which the model cannot
    reproduce. Both stored as meeting the goal (as an older model scored them)."""
    seeds = [
        [_job("j0", "key", 4, 0.0, 0.05, 10.0), _job("j1", "regular", 2, 1.0, 10.1, 10.0)],
        [_job("j0", "key", 1, 0.0, 0.05, 5.0), _job("j1", "regular", 1, 1.0, 40.0, 5.0)],
    ]
    path.write_text(
        json.dumps(
            {
                "scheduler": "kueue",
                "seeds": [
                    {
                        "seed": seed,
                        "runs": runs,
                        "kueue_model": _scored(True),
                        "strict_order": _scored(False),
                    }
                    for seed, runs in enumerate(seeds, start=1)
                ],
            }
        )
    )
    return path


def test_each_stored_run_counts_the_goal_as_it_ran_and_rescored_now(tmp_path):
    [row] = standing([_kueue_run(tmp_path / "replay_fidelity-kueue-x.json")])
    assert (row["scheduler"], row["scenario"], row["seeds"]) == ("kueue", "default", "1-2")
    assert row["as_run"]["kueue_model"] == {"seeds": 2, "goal_met": 2, "order_agrees": 2}
    assert row["as_run"]["strict_order"]["goal_met"] == 0
    # Seed 2: the regular job 39 s late on the lab, at once replayed; the tiers tied replayed.
    assert row["now"]["kueue_model"] == {"seeds": 2, "goal_met": 1, "order_agrees": 1}


def test_a_slurm_run_without_the_labs_slurm_conf_stands_as_it_ran(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-such-slurm.conf"))
    path = tmp_path / "replay_fidelity-slurm-x.json"
    fig = {"seed": 7, "runs": [], "slurm_model": _scored(True), "strict_order": _scored(True)}
    path.write_text(json.dumps({"scheduler": "slurm", "seeds": [fig]}))
    [row] = standing([path])
    assert row["seeds"] == "7"
    assert row["as_run"]["slurm_model"]["goal_met"] == 1
    assert row["now"] is None


def test_files_that_are_no_lab_run_are_left_out(tmp_path):
    (tmp_path / "a.json").write_text("not json")
    (tmp_path / "b.json").write_text(json.dumps({"benchmark": "replay", "rows": []}))
    (tmp_path / "c.json").write_text(json.dumps({"scheduler": "kueue", "seeds": []}))
    assert standing(sorted(tmp_path.glob("*.json"))) == []


def test_the_command_prints_each_run_and_the_totals(tmp_path, capsys, monkeypatch):
    path = _kueue_run(tmp_path / "replay_fidelity-kueue-x.json")
    monkeypatch.setattr(sys, "argv", ["replay_fidelity.py", "--standing", str(path)])
    assert main() == 0
    out = capsys.readouterr().out
    assert "as run: model 2/2 (order 2), strict order 0/2; now: model 1/2 (order 1)" in out
    assert "kueue model, default: goal met now on 1 of 2 seed runs (1 file)" in out


def test_nothing_to_score_is_an_error(tmp_path, capsys, monkeypatch):
    (tmp_path / "a.json").write_text("{}")
    monkeypatch.setattr(sys, "argv", ["replay_fidelity.py", "--standing", str(tmp_path / "a.json")])
    assert main() == 1
    assert "no stored lab run to score" in capsys.readouterr().err


def test_a_slurm_run_cannot_be_rescored_without_the_labs_slurm_conf(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-such-slurm.conf"))
    path = tmp_path / "replay_fidelity-slurm-x.json"
    path.write_text(json.dumps({"scheduler": "slurm", "seeds": []}))
    monkeypatch.setattr(sys, "argv", ["replay_fidelity.py", "--rescore", str(path)])
    assert main() == 1
    assert "cannot rescore replay_fidelity-slurm-x.json" in capsys.readouterr().err


LAB_CONF = """\
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1
PriorityType=priority/multifactor
PriorityWeightQOS=100000
PriorityWeightFairshare=10000
PriorityWeightAge=1000
PreemptType=preempt/qos
PreemptMode=REQUEUE
GresTypes=gpu
NodeName=lab NodeAddr=127.0.0.1 CPUs=32 RealMemory=64000 Gres=gpu:a100:4,gpu:h100:4 State=UNKNOWN
PartitionName=gpu Nodes=lab Default=YES MaxTime=INFINITE State=UP
"""


def test_a_slurm_run_is_rescored_under_the_slurm_conf_stored_with_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-such-slurm.conf"))
    runs = [
        {**_job("1", "key", 2, 0.0, 0.5, 10.0), "by": "main"},
        {**_job("2", "regular", 2, 1.0, 1.5, 10.0), "by": "main"},
    ]
    path = tmp_path / "replay_fidelity-slurm-x.json"
    fig = {"seed": 3, "runs": runs, "slurm_model": _scored(False), "strict_order": _scored(False)}
    path.write_text(json.dumps({"scheduler": "slurm", "slurm_conf": LAB_CONF, "seeds": [fig]}))
    [row] = standing([path])
    # Both started within a second or two of their submission on a free node, as replayed.
    assert row["now"]["slurm_model"] == {"seeds": 1, "goal_met": 1, "order_agrees": 1}


def test_a_seed_the_model_preempts_in_a_loop_is_replayed_as_long_as_the_lab_watched(
    monkeypatch,
):
    """Busy seed 5 with a 1.2 s requeue batch: three jobs take the same H100s from each other
    every 1.2 s, for ever. The replay stops where the lab stopped watching (``LAB_TIMEOUT``)."""
    monkeypatch.setattr(kueue_model, "REQUEUE_BATCH", 1.2)
    path = RESULTS / "replay_fidelity-kueue-busy-20261207T003623Z.json"
    [fig] = [fig for fig in rescored(path) if fig["seed"] == 5]
    # A loop: far more preemptions than Kueue's 65 on the lab (and than the model's 64 with
    # Kueue's own 1 s batch), every one of them within the 900 s watched.
    assert fig["kueue_model"]["preempted"]["model"] > 500


def test_a_lab_run_whose_seeds_cannot_be_read_is_a_clear_error(tmp_path, capsys, monkeypatch):
    path = tmp_path / "replay_fidelity-kueue-x.json"
    fig = {"seed": 1, "runs": [{"tier": "key"}], "kueue_model": _scored(True)}
    path.write_text(json.dumps({"scheduler": "kueue", "seeds": [fig]}))
    for args in (["--standing", str(path)], ["--rescore", str(path)]):
        monkeypatch.setattr(sys, "argv", ["replay_fidelity.py", *args])
        assert main() == 1
        assert "replay_fidelity-kueue-x.json is not a lab run's results" in capsys.readouterr().err


def test_a_missing_file_cannot_be_rescored(tmp_path, capsys, monkeypatch):
    path = tmp_path / "replay_fidelity-kueue-gone.json"
    monkeypatch.setattr(sys, "argv", ["replay_fidelity.py", "--rescore", str(path)])
    assert main() == 1
    assert "cannot rescore replay_fidelity-kueue-gone.json" in capsys.readouterr().err
