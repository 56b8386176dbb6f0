"""The Slurm model of the replay (``queues.replay.slurm_model``), by hand: multifactor
priority, Fair Tree, ``slurm.conf`` parsing, the main scheduler's blocked partition, backfill
with time limits and whole-node reservations, node packing by GPU type, QOS preemption."""

import math
from types import SimpleNamespace

import pytest

from queues.replay import ClassRule, Job, QuotaRule, Rules, TierRule, replay
from queues.replay.adapt import scheduler_model
from queues.replay.scheduler_model import SchedulerModel
from queues.replay.slurm_conf import (
    Node,
    SlurmSettings,
    age_factor,
    fair_tree,
    priority,
    slurm_minutes,
)
from queues.replay.slurm_model import SlurmReplay, slurm_replay

LAB_CONF = """
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1
AuthInfo=socket=/x/munge.socket,cred_expire=10
PriorityType=priority/multifactor
PriorityWeightQOS=100000
PriorityWeightFairshare=10000
PriorityWeightAge=1000
PriorityMaxAge=1-0
PriorityDecayHalfLife=7-0
PriorityCalcPeriod=1
PreemptType=preempt/qos
PreemptMode=REQUEUE
NodeName=gpu01 NodeAddr=127.0.0.1 CPUs=32 Gres=gpu:a100:4,gpu:h100:4 State=UNKNOWN
PartitionName=gpu Nodes=gpu01 Default=YES MaxTime=INFINITE State=UP
"""

A100 = "lab/a100"
H100 = "lab/h100"


def _rules(**tiers: TierRule) -> Rules:
    chosen = tiers or {
        "high": TierRule("high", 70),
        "low": TierRule("low", 10),
    }
    top = max(chosen.values(), key=lambda tier: tier.score).slug
    return Rules(
        capacity={A100: 4.0, H100: 4.0},
        tiers=tuple(chosen.values()),
        classes=(ClassRule("allowed"), ClassRule("never", "forbidden")),
        quotas=(
            QuotaRule("p", A100, 0.0),
            QuotaRule("p", H100, 0.0),
            QuotaRule("q", A100, 0.0, preemption_class="never"),
        ),
        project_tiers={"p": top, "q": top},
        default_class="allowed",
    )


def _settings(**kw: object) -> SlurmSettings:
    """The lab's settings; the worked examples time the main pass at whole seconds and run it
    at an end (as with an ``Epilog``) unless a test says otherwise."""
    kw.setdefault("sched_phase", 0.0)
    kw.setdefault("main_at_end", True)
    return SlurmSettings.from_conf(LAB_CONF, **kw)


def _job(name: str, at: float, gpus: float, run: float, tier: str, **kw: object) -> Job:
    fields: dict[str, object] = {"flavor": A100, "project": "p", "user": "u"}
    fields.update(kw)
    return Job(name=name, arrival=at, gpus=gpus, duration=run, tier=tier, **fields)  # type: ignore[arg-type]


def _starts(jobs: list[Job], rules: Rules | None = None, **kw: object) -> dict[str, float]:
    result = slurm_replay(jobs, [(0.0, rules or _rules())], _settings(**kw))
    return {job.name: start for job, start in zip(jobs, result.start, strict=True)}


def test_the_lab_conf_is_read_as_slurm_reads_it():
    s = _settings()
    assert (s.weight_qos, s.weight_fairshare, s.weight_age) == (100000, 10000, 1000)
    assert s.max_age == 86400 and s.calc_period == 60 and s.decay_half_life == 7 * 86400
    assert s.backfill and s.sched_interval == 2 and s.bf_interval == 1
    assert s.bf_window == 86400 and s.bf_resolution == 60  # Slurm's defaults
    assert s.preempt and s.preempt_requeue and s.requeue_delay == 11
    assert s.nodes == (Node("gpu01", {"a100": 4.0, "h100": 4.0}),)
    assert math.isinf(s.max_time)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5", 300),
        ("1:30", 90),
        ("2:00:00", 7200),
        ("1-0", 86400),
        ("1-2:30", 95400),
        ("INFINITE", math.inf),
    ],
)
def test_slurm_times(text, seconds):
    assert slurm_minutes(text) == seconds


def test_multifactor_priority_weights_qos_fair_share_and_capped_age():
    s = _settings(qos_priority={"key": 700, "regular": 400, "top": 950})
    # QOS normalised by the highest QOS priority; age capped at PriorityMaxAge; truncated.
    assert priority(s, waited=0, fairshare=1.0, qos=s.qos_factor("key", 0)) == int(
        100000 * 700 / 950 + 10000
    )
    assert priority(s, waited=43200, fairshare=0.5, qos=s.qos_factor("regular", 0)) == int(
        500 + 5000 + 100000 * 400 / 950
    )
    assert age_factor(3 * 86400, 86400) == 1.0
    assert priority(s, waited=3 * 86400, fairshare=0, qos=0) == 1000


def test_fair_tree_ranks_accounts_by_shares_over_usage():
    factors = fair_tree({"a": 1, "b": 1, "c": 2}, {"a": 10, "b": 30, "c": 0})
    # c never ran (infinite level fair share): first; a used less than b for the same shares.
    assert factors == {"c": 1.0, "a": 2 / 3, "b": 1 / 3}
    assert fair_tree({"a": 1, "b": 1}, {}) == {"a": 1.0, "b": 1.0}  # ties share a rank


def test_the_tier_orders_the_queue_and_a_blocked_top_job_blocks_the_main_scheduler():
    jobs = [
        _job("running", 0, 3, 60, "low"),
        _job("top", 1, 4, 10, "high"),
        _job("small", 2, 1, 10, "low"),
    ]
    # Without backfill the first job in priority order that does not fit blocks the rest.
    starts = _starts(jobs, backfill=False)
    assert starts == {"running": 0, "top": 60, "small": 70}


def test_backfill_starts_a_job_that_ends_before_the_top_jobs_reservation():
    jobs = [
        _job("running", 0, 3, 60, "low", time_limit=60.0),
        _job("top", 1, 4, 10, "high", time_limit=60.0),
        _job("short", 2, 1, 20, "low", time_limit=30.0),  # ends by 33 < 60: backfilled
        _job("long", 3, 1, 20, "low", time_limit=120.0),  # would hold the node past 60
    ]
    starts = _starts(jobs)
    assert starts["short"] == 2
    assert starts["top"] == 60
    assert starts["long"] == 70


def test_a_reservation_holds_the_whole_node_even_for_another_gpu_type():
    jobs = [
        _job("running", 0, 3, 60, "low", time_limit=60.0),
        _job("top", 1, 4, 10, "high", time_limit=60.0),
        # An H100 job on the same node: its GPUs are free, but backfill does not start it
        # (the node is reserved from 60 on); the main scheduler does, after the top job.
        _job("h100", 2, 1, 20, "low", flavor=H100, time_limit=120.0),
    ]
    assert _starts(jobs)["h100"] == 60


def test_without_time_limits_no_reservation_falls_in_the_window_and_backfill_fills():
    jobs = [
        _job("running", 0, 3, 60, "low"),
        _job("top", 1, 4, 10, "high"),
        _job("small", 2, 1, 10, "low"),
    ]
    starts = _starts(jobs)
    assert starts["small"] == 2  # started by backfill before the higher job
    assert starts["top"] == 60


def test_jobs_pack_nodes_by_gpu_type():
    nodes = (Node("n1", {"a100": 2.0}), Node("n2", {"a100": 4.0, "h100": 4.0}))
    jobs = [
        _job("a", 0, 2, 30, "low"),
        _job("b", 0, 3, 30, "low"),  # only n2 has 3 A100s
        _job("c", 0, 2, 30, "low"),  # the A100s left: n2's 1 — waits (and blocks the pass)
        _job("h", 0, 4, 30, "low", flavor=H100),  # started by backfill's pass of that second
    ]
    model = SlurmReplay(jobs, [(0.0, _rules())], _settings(nodes=nodes))
    result = model.run()
    assert result.start == [0, 0, 30, 0]
    assert model.started_by == ["main", "main", "main", "backfill"]


def test_a_job_is_ended_at_its_time_limit():
    result = slurm_replay(
        [_job("x", 0, 1, 300, "low", time_limit=60.0)], [(0.0, _rules())], _settings()
    )
    assert result.end == [60.0]


def test_qos_preemption_requeues_the_victim_which_waits_cred_expire():
    rules = _rules(
        high=TierRule("high", 70, may_preempt=True, preemptible=frozenset({"low"})),
        low=TierRule("low", 10),
    )
    jobs = [
        _job("victim", 0, 2, 100, "low"),
        _job("protected", 0, 2, 100, "low", project="q"),  # never-preempt
        _job("preemptor", 5, 2, 10, "high"),
    ]
    result = slurm_replay(jobs, [(0.0, rules)], _settings())
    starts = dict(zip([j.name for j in jobs], result.start, strict=True))
    assert starts["victim"] == 0 and starts["preemptor"] == 5
    assert result.preemptions == [1, 0, 0]
    assert result.preempted_by == [(0, 2, 5.0, "tier")]
    # Requeued: eligible again 11 s later (cred_expire + 1), restarted with all its work lost.
    assert [run for run in result.runs if run[0] == 0][1][1] >= 16
    assert result.end[0] >= 16 + 100


def test_the_cluster_scheduler_picks_the_model():
    jobs = [
        _job("running", 0, 3, 60, "low"),
        _job("top", 1, 4, 10, "high"),
        _job("small", 2, 1, 10, "low"),
    ]
    timeline = [(0.0, _rules())]
    engine = replay(jobs, timeline)
    slurm = replay(jobs, timeline, model=SchedulerModel("slurm", _settings()))
    assert engine.start[2] == 70  # the engine's strict order: no backfill
    assert slurm.start[2] == 2
    assert replay(jobs, timeline, model=SchedulerModel("strict")).start == engine.start
    # Kueue's BestEffortFIFO admits the small job past the head that does not fit, too.
    assert replay(jobs, timeline, model=SchedulerModel("kueue")).start[2] == 2
    with pytest.raises(ValueError, match="no replay model"):
        replay(jobs, timeline, model=SchedulerModel("lsf"))


@pytest.mark.django_db
def test_a_cluster_picks_its_schedulers_model(tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text(LAB_CONF)
    slurm = scheduler_model(SimpleNamespace(backend="slurm", slurm_conf=str(conf)))
    assert slurm.scheduler == "slurm" and slurm.slurm is not None
    assert slurm.slurm.weight_qos == 100000 and slurm.slurm.nodes[0].name == "gpu01"
    unreadable = scheduler_model(SimpleNamespace(backend="slurm", slurm_conf=str(tmp_path / "x")))
    assert unreadable.slurm == SlurmSettings(qos_priority=unreadable.slurm.qos_priority)
    assert scheduler_model(SimpleNamespace(backend="kueue", slurm_conf="")).scheduler == "kueue"


def test_a_submission_waits_for_the_next_pass_of_either_scheduler():
    jobs = [_job("x", 0.2, 1, 10, "low")]
    # Backfill every second at 0.5 past it starts the job there (Slurm never starts a batch
    # job in its submit RPC) ...
    model = SlurmReplay(jobs, [(0.0, _rules())], _settings(bf_phase=0.5))
    assert model.run().start == [0.5] and model.started_by == ["backfill"]
    # ... without backfill, the main scheduler's next periodic pass (sched_interval=2) does.
    model = SlurmReplay(jobs, [(0.0, _rules())], _settings(backfill=False, sched_phase=0.1))
    assert model.run().start == [2.1] and model.started_by == ["main"]


def test_without_an_epilog_an_end_waits_for_the_next_pass_of_either_scheduler():
    # Slurm 22.05 without an Epilog: slurmd answers the terminate request "already complete",
    # slurmctld frees the node and only queues a scheduler request; the GPUs back 0.4 s after
    # the end at 10.2 wait for the next backfill pass (every second at 0.2; the main
    # scheduler's run every 2 s at 0.5, the next at 12.5).
    jobs = [_job("running", 0, 4, 10, "low"), _job("next", 1, 4, 10, "low")]
    settings = _settings(end_delay=0.4, bf_phase=0.2, sched_phase=0.5, main_at_end=False)
    model = SlurmReplay(jobs, [(0.0, _rules())], settings)
    assert model.run().start == [0.2, 11.2]
    assert model.started_by == ["backfill", "backfill"]
    # Without backfill, the main scheduler's next periodic pass starts it.
    settings = _settings(backfill=False, end_delay=0.4, sched_phase=0.5, main_at_end=False)
    model = SlurmReplay(jobs, [(0.0, _rules())], settings)
    assert model.run().start == [0.5, 12.5] and model.started_by == ["main", "main"]


def test_with_an_epilog_an_end_runs_the_main_scheduler_when_the_gpus_come_back():
    # slurmd sends an epilog-complete message, on which slurmctld runs the main scheduler.
    jobs = [_job("running", 0, 4, 10, "low"), _job("next", 1, 4, 10, "low")]
    settings = SlurmSettings.from_conf(
        LAB_CONF + "Epilog=/etc/slurm/epilog.sh\n", end_delay=0.4, bf_phase=0.9, sched_phase=1.5
    )
    assert settings.main_at_end
    model = SlurmReplay(jobs, [(0.0, _rules())], settings)
    assert model.run().start == [0.9, 11.3]  # the end at 10.9, its GPUs back 0.4 s later
    assert model.started_by == ["backfill", "main"]


def test_a_completing_job_holds_its_gpus_until_end_delay_after_its_end():
    # "running" ends at 10.5; an arrival at 10.6 runs the main scheduler at 10.75 (every 2 s
    # at 0.75). With the GPUs back 0.5 s after the end (still completing at 10.75) the top
    # job does not fit and blocks the partition; backfill at 11.5 starts both.
    jobs = [
        _job("running", 0, 4, 10, "low"),
        _job("next", 1, 4, 10, "low"),
        _job("other", 10.6, 1, 5, "low", flavor=H100),
    ]
    model = SlurmReplay(
        jobs,
        [(0.0, _rules())],
        _settings(end_delay=0.5, bf_phase=0.5, sched_phase=0.75, main_at_end=False),
    )
    assert model.run().start == [0.5, 11.5, 11.5]
    assert model.started_by == ["backfill", "backfill", "backfill"]
    # Back 0.05 s after the end, they are free at 10.75: the main scheduler starts both.
    model = SlurmReplay(
        jobs,
        [(0.0, _rules())],
        _settings(end_delay=0.05, bf_phase=0.5, sched_phase=0.75, main_at_end=False),
    )
    assert model.run().start == [0.5, 10.75, 10.75]
    assert model.started_by == ["backfill", "main", "main"]


def test_the_epilog_setting_follows_slurm_conf():
    lab = SlurmSettings.from_conf(LAB_CONF)
    assert not lab.main_at_end  # no Epilog
    assert SlurmSettings.from_conf(LAB_CONF + "Epilog=/x/epilog\n").main_at_end
    deferred = LAB_CONF.replace("bf_interval=1", "bf_interval=1,defer") + "Epilog=/x/e\n"
    assert not SlurmSettings.from_conf(deferred).main_at_end  # defer: queued, not run at once
    # By default the main pass falls half a second after a backfill pass, never with it.
    assert (lab.sched_phase, lab.bf_phase) == (0.5, 0.0)


def test_backfill_reservations_are_floored_to_bf_resolution():
    jobs = [
        _job("running", 0, 3, 100, "low", time_limit=74.0),  # planned to end at 74
        _job("top", 1, 4, 10, "high", time_limit=60.0),  # reserved from 74, floored to 60
        _job("short", 17, 1, 20, "low", time_limit=50.0),  # would end at 67 < 74
    ]
    assert _starts(jobs)["short"] == 84  # 67 > 60: not backfilled; runs after the top job
    assert _starts(jobs, bf_resolution=1.0)["short"] == 17


def test_a_held_job_does_not_block_and_queues_again_when_its_tier_use_drops():
    rules = _rules(
        high=TierRule("high", 70),
        low=TierRule("low", 10, max_gpus_total=2),
    )
    jobs = [
        _job("low1", 0, 2, 30, "low"),
        _job("low2", 1, 1, 10, "low"),  # held by the tier cap (QOSGrpGRES) ...
        _job("high", 2, 1, 10, "high"),  # ... which does not block the higher job
    ]
    model = SlurmReplay(jobs, [(0.0, rules)], _settings())
    result = model.run()
    assert result.start == [0, 30, 2]
    assert (1, 1.0, "QOSGrpGRES") in result.reasons
