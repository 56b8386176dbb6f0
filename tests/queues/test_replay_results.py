"""A replay's output as the rows the monthly review reads (``queues.replay.results``): hours
in ``WorkloadHour``'s columns and preemptions in the columns of the review's preemption CTE,
worked out by hand on small scenarios."""

import pytest

from queues.replay import QuotaRule, replay
from queues.replay.results import hour_rows, preemption_rows
from tests.queues.test_replay_engine import MIN, F, job, rules

HOUR = 60 * MIN


def test_hours_hold_the_gpu_time_run_and_the_waits_by_reason():
    """a1 takes a's 8 GPUs 0:30–1:30; a2, within a's guarantee, waits for them (Resources),
    then runs 1:30–2:00; e1 waits behind a2 (Priority: a queue rule, neither quota nor
    resources), then for the GPUs a2 holds (Resources), then on quota from 2:00 on
    (AccountingPolicy: a lends nothing) to the horizon at 4:00."""
    quotas = (QuotaRule("a", F, 8, lending_limit=0), QuotaRule("e", F, 0))
    jobs = [job("a1", 30, 8, 60, "a"), job("a2", 30, 8, 30, "a"), job("e1", 30, 1, 10, "e")]
    result = replay(jobs, [(0, rules(*quotas))], until=4 * HOUR)
    rows = hour_rows(result)
    # [GPU-seconds run, seconds waiting on quota, seconds waiting for resources]
    assert rows == {
        (0, F, "a", "prod"): pytest.approx([8 * 30 * MIN, 0, 30 * MIN]),
        (3600, F, "a", "prod"): pytest.approx([8 * 60 * MIN, 0, 30 * MIN]),
        (3600, F, "e", "explore"): pytest.approx([0, 0, 30 * MIN]),
        (7200, F, "e", "explore"): pytest.approx([0, HOUR, 0]),
        (10800, F, "e", "explore"): pytest.approx([0, HOUR, 0]),
    }
    # Every GPU-second the engine integrates is in some hour.
    assert sum(values[0] for values in rows.values()) == pytest.approx(
        sum(result.used_gpu_seconds.values())
    )


def test_a_preemption_row_has_its_run_and_its_restart():
    quotas = (QuotaRule("e", F, 0), QuotaRule("a", F, 8))
    jobs = [job("e1", 0, 8, 100, "e"), job("a1", 10, 8, 20, "a")]
    result = replay(jobs, [(0, rules(*quotas))])
    assert preemption_rows(result) == [(10 * MIN, 8.0, "e", "explore", "allowed", F, 0.0, 30 * MIN)]
    # Not started again by the horizon: no restart.
    result = replay(jobs, [(0, rules(*quotas))], until=20 * MIN)
    assert preemption_rows(result)[0][-1] is None
