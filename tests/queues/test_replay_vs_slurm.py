"""The replay against a real Slurm: the same small workload, scaled to minutes, submitted with
``sbatch`` and replayed by the engine, under two rule sets (with and without a cap on the
exploratory tier). Per tier, the median start delay of the replay must be close to Slurm's
(the error is printed), and both must order the two rule sets the same way.

The lab's one node has 4 A100s; jobs ask for typed GPUs (``gpu:a100:N``) and sleep for their
duration. Slurm's own latency (its scheduling interval of 2 s, whole-second timestamps, the
time ``sbatch`` takes) is what the tolerance allows for.
"""

import re
import statistics
import time
from datetime import datetime

import pytest

from governance import services as rules
from queues import services
from queues.models import SyncStatus
from queues.replay import Job, replay
from queues.replay.adapt import rules_at
from tests.conftest import REASON

pytestmark = pytest.mark.django_db

# (seconds after the first submission, GPUs, seconds run, tier)
WORKLOAD = [
    (0, 2, 16, "exploratory"),
    (0, 1, 12, "exploratory"),
    (1, 1, 14, "exploratory"),
    (2, 2, 10, "key"),
    (3, 1, 12, "exploratory"),
    (4, 2, 8, "key"),
    (5, 1, 10, "exploratory"),
    (7, 1, 12, "key"),
    (8, 2, 14, "exploratory"),
    (10, 1, 8, "key"),
    (12, 1, 10, "exploratory"),
    (14, 2, 12, "key"),
    (16, 1, 8, "exploratory"),
    (18, 1, 10, "key"),
    (20, 2, 10, "exploratory"),
    (22, 1, 8, "key"),
    (24, 1, 12, "exploratory"),
    (26, 2, 8, "key"),
    (28, 1, 10, "exploratory"),
    (30, 1, 8, "key"),
    (32, 2, 10, "exploratory"),
    (34, 1, 8, "exploratory"),
]
TIERS = ("key", "exploratory")
FLAVOR = "lab/a100"
TOLERANCE = 10.0  # seconds, on top of 25 % of Slurm's median


def _when(text: str, field: str) -> float:
    found = re.search(rf"\b{field}=(\S+)", text)
    assert found, f"no {field} in {text}"
    return datetime.fromisoformat(found.group(1)).timestamp()


def _run_on_slurm(lab, slurm, accounts: dict[str, str]) -> list[Job]:
    """Submit the workload; return it as the replay's jobs, with Slurm's start delays."""
    began = time.monotonic()
    ids = []
    for offset, gpus, seconds, tier in WORKLOAD:
        time.sleep(max(0.0, began + offset - time.monotonic()))
        job = slurm.run(
            "sbatch",
            "--parsable",
            "-o",
            "/dev/null",
            "-A",
            accounts[tier],
            "-q",
            tier,
            f"--gres=gpu:a100:{gpus}",
            "--wrap",
            f"sleep {seconds}",
        ).strip()
        slurm.jobs.append(job)
        ids.append(job)
    slurm.wait_for(
        "every job to end",
        lambda: all(slurm.job(job)["state"] in {"COMPLETED", ""} for job in ids),
        timeout=600,
    )
    jobs = []
    for job, (_offset, gpus, seconds, tier) in zip(ids, WORKLOAD, strict=True):
        shown = slurm.run("scontrol", "show", "job", job)
        submit, start = _when(shown, "SubmitTime"), _when(shown, "StartTime")
        jobs.append(
            Job(
                name=f"{job}:{start - submit}",
                arrival=submit,
                gpus=float(gpus),
                flavor=FLAVOR,
                duration=float(seconds),
                project=accounts[tier].split(".", 1)[1],
                tier=tier,
            )
        )
    return jobs


def _medians(delays: dict[str, list[float]]) -> dict[str, float]:
    return {tier: statistics.median(values) for tier, values in delays.items()}


def _compare(jobs: list[Job]) -> tuple[dict[str, float], dict[str, float]]:
    slurm_delays: dict[str, list[float]] = {tier: [] for tier in TIERS}
    replay_delays: dict[str, list[float]] = {tier: [] for tier in TIERS}
    result = replay(
        jobs, [(min(job.arrival for job in jobs), rules_at(at=datetime.now().astimezone()))]
    )
    for job, start in zip(jobs, result.start, strict=True):
        slurm_delays[job.tier].append(float(job.name.split(":")[1]))
        replay_delays[job.tier].append(start - job.arrival)
    return _medians(slurm_delays), _medians(replay_delays)


def test_the_replay_and_slurm_agree_on_start_delays_under_two_rule_sets(lab, slurm):
    hi, _ = lab.project("hi", tier=lab.key, borrow=4)
    lo, _ = lab.project("lo", tier=lab.key, borrow=4)
    accounts = {"key": lab.account(hi), "exploratory": lab.account(lo)}
    outcomes = {}
    for name, cap in (("no tier cap", None), ("exploratory capped at 2 GPUs", 2)):
        if cap is not None:
            rules.tier_update(
                tier=lab.exploratory, user=lab.ops, reason=REASON, data={"max_gpus_total": cap}
            )
        run = services.sync_now(cluster=lab.cluster, user=lab.ops)
        assert run.status == SyncStatus.SUCCEEDED, run.error
        jobs = _run_on_slurm(lab, slurm, accounts)
        on_slurm, replayed = _compare(jobs)
        outcomes[name] = (on_slurm, replayed)
        for tier in TIERS:
            error = replayed[tier] - on_slurm[tier]
            print(
                f"{name}: {tier} median start delay: Slurm {on_slurm[tier]:.1f} s, "
                f"replay {replayed[tier]:.1f} s, error {error:+.1f} s"
            )
            assert abs(error) <= TOLERANCE + 0.25 * on_slurm[tier], (name, tier)
    (free_slurm, free_replay), (capped_slurm, capped_replay) = outcomes.values()
    # Both see the key tier start sooner than the exploratory tier, and the cap make the
    # exploratory tier wait longer.
    for slurm_medians, replay_medians in outcomes.values():
        assert slurm_medians["key"] <= slurm_medians["exploratory"]
        assert replay_medians["key"] <= replay_medians["exploratory"]
    assert capped_slurm["exploratory"] > free_slurm["exploratory"]
    assert capped_replay["exploratory"] > free_replay["exploratory"]
