"""The lab against itself (``bench/replay_fidelity.py --spread``): one stored run of each
seed scored as the prediction of another run of the same seed, as the replay is scored."""

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.fidelity_score import lab_delays, spread
from bench.replay_fidelity import main


def _run(submit: float, start: float, tier: str, *, precise: bool = True) -> dict[str, Any]:
    """A job of a stored Kueue run, as the driver writes it."""
    return {
        "id": f"j-{tier}",
        "tier": tier,
        "type": "a100",
        "gpus": 1,
        "limit_min": None,
        "submit": submit,
        "start": start,
        "end": start + 10.0,
        "precise": precise,
    }


def _stored(path: Path, seeds: dict[int, dict[str, float]]) -> Path:
    """A results file whose seed has one job per tier, waiting the seconds given."""
    path.write_text(
        json.dumps(
            {
                "scheduler": "kueue",
                "seeds": [
                    {
                        "seed": seed,
                        "runs": [_run(10.0, 10.0 + wait, tier) for tier, wait in waits.items()],
                    }
                    for seed, waits in seeds.items()
                ],
            }
        )
    )
    return path


def test_a_seed_within_the_goal_and_in_the_same_order_meets_it_both_ways(tmp_path):
    first = _stored(tmp_path / "a.json", {1: {"key": 2.0, "regular": 20.0}})
    second = _stored(tmp_path / "b.json", {1: {"key": 3.0, "regular": 22.0}})
    out = spread(first, second)
    assert (out["seeds"], out["first_predicts_second"], out["back"]) == (1, 1, 1)


def test_a_tier_beyond_the_goal_or_another_order_misses_it(tmp_path):
    first = _stored(
        tmp_path / "a.json",
        {1: {"key": 2.0, "regular": 40.0}, 2: {"key": 3.0, "regular": 11.0}},
    )
    second = _stored(
        tmp_path / "b.json",
        {1: {"key": 2.0, "regular": 20.0}, 2: {"key": 11.0, "regular": 3.0}},
    )
    rows = {row["seed"]: row for row in spread(first, second)["rows"]}
    assert rows[1]["first_predicts_second"] == {
        "goal_met": False,
        "order_agrees": True,
        "missed": {"regular": 20.0},
    }
    # Each tier within 10 s, but the other way round (beyond the 2 s tie): another order.
    assert rows[2]["first_predicts_second"]["missed"] == {}
    assert rows[2]["first_predicts_second"]["order_agrees"] is False
    assert rows[2]["back"]["goal_met"] is False


def test_a_kueue_run_stamped_in_whole_seconds_is_read_as_the_replay_reads_it(tmp_path):
    path = tmp_path / "a.json"
    run = _run(10.2, 11.0, "key", precise=False)
    path.write_text(json.dumps({"scheduler": "kueue", "seeds": [{"seed": 1, "runs": [run]}]}))
    # Admitted within [11, 12): the middle, 1.3 s after the submission.
    assert lab_delays(path)[1]["key"] == pytest.approx(1.3)


def test_files_without_a_common_seed_are_refused(tmp_path, capsys, monkeypatch):
    first = _stored(tmp_path / "a.json", {1: {"key": 2.0}})
    second = _stored(tmp_path / "b.json", {2: {"key": 2.0}})
    monkeypatch.setattr(sys, "argv", ["replay_fidelity.py", "--spread", str(first), str(second)])
    assert main() == 1
    assert "share no seed" in capsys.readouterr().err
