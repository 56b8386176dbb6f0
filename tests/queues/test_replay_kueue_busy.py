"""The lab's busy Kueue scenario (``bench/kueue_scenarios.BUSY``), which checks the model's
preemption rate on a pool shaped like the replay benchmark's: the ClusterQueues' preemption
and weights reach both the lab's objects' source and the replay's rules, and each job goes to
a project that sends its tier's work, the same one every time (no lab needed)."""

from dataclasses import replace

from bench.fidelity_kueue import kueue_rules, kueue_settings
from bench.kueue_scenarios import BUSY
from queues.replay.kueue_cohort import ANY, LOWER_PRIORITY, NEVER
from queues.replay.mixes import mixed_workload


def test_the_busy_scenario_preempts_within_the_key_queue_only_and_reclaims_everywhere():
    settings = kueue_settings(BUSY)
    assert settings.within == {
        "p-key": LOWER_PRIORITY,
        "p-reg": NEVER,
        "p-reg2": NEVER,
        "p-expl": NEVER,
    }
    assert set((settings.reclaim or {}).values()) == {ANY}
    weights = {quota.project: quota.fair_share_weight for quota in kueue_rules(BUSY).quotas}
    assert weights == {"p-key": 1.0, "p-reg": 2.0, "p-reg2": 3.0, "p-expl": 1.0}


def test_each_job_goes_to_a_project_sending_its_tier_and_always_the_same():
    takers = {
        "key": {"p-key"},
        "regular": {"p-key", "p-reg", "p-reg2"},
        "exploratory": {"p-reg", "p-expl"},
    }
    jobs = [replace(job, time_limit_minutes=None) for job in mixed_workload(1, jobs=50)]
    placed = [BUSY.place(job) for job in jobs]
    for job in placed:
        assert job.project in takers[job.tier]
    assert [BUSY.place(job).project for job in jobs] == [job.project for job in placed]
    assert {job.project for job in placed} == {"p-key", "p-reg", "p-reg2", "p-expl"}
