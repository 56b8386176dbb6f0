"""The Kueue model of the replay (``queues.replay.kueue_model``), by hand: BestEffortFIFO
(a head that does not fit is passed over, in its own queue and in the cohort's others, and
looked at again only when Kueue requeues the inadmissible workloads, a second after an end),
fair sharing ordering the cohort's queues before priority, and priority as the
WorkloadPriorityClass value (the tier's scheduler value), as Kueue 0.17 does."""

import math

from bench.replay import START, bench_loads, bench_rules, outcome, scaled
from queues.replay import ClassRule, Job, QuotaRule, Rules, TierRule, replay
from queues.replay.engine import Result
from queues.replay.kueue_cohort import KueueSettings
from queues.replay.mixes import mixed_workload
from queues.replay.scheduler_model import SchedulerModel
from queues.replay.workload import generate

A100 = "lab/a100"
H100 = "lab/h100"
KUEUE = SchedulerModel("kueue")


def _rules() -> Rules:
    tiers = (TierRule("key", 70), TierRule("regular", 40), TierRule("exploratory", 10))
    return Rules(
        capacity={A100: 4.0, H100: 4.0},
        tiers=tiers,
        classes=(),
        quotas=tuple(
            QuotaRule(f"p-{tier.slug}", flavor, 0.0) for tier in tiers for flavor in (A100, H100)
        ),
        project_tiers={f"p-{tier.slug}": tier.slug for tier in tiers},
    )


def _job(name: str, at: float, gpus: float, run: float, tier: str, flavor: str = A100) -> Job:
    return Job(name, at, gpus, flavor, run, project=f"p-{tier}", tier=tier)


def _starts(jobs: list[Job], model: SchedulerModel | None = KUEUE) -> dict[str, float]:
    result = replay(jobs, [(0.0, _rules())], model=model)
    return {job.name: start for job, start in zip(jobs, result.start, strict=True)}


def test_a_head_that_does_not_fit_is_passed_over_in_the_cohort():
    jobs = [
        _job("running", 0, 3, 60, "exploratory"),
        _job("big", 1, 4, 10, "key"),
        _job("small", 2, 1, 10, "regular"),
    ]
    # The big job was set aside (inadmissible); the end at 60 requeues it a batch period
    # (Kueue's requeueBatchPeriod, 1 s) later.
    assert _starts(jobs) == {"running": 0, "big": 61, "small": 2}
    # The engine's strict order keeps the small job behind the big one.
    assert _starts(jobs, model=None)["small"] == 70


def test_a_head_that_does_not_fit_is_passed_over_in_its_own_queue():
    jobs = [
        _job("running", 0, 3, 60, "exploratory"),
        _job("big", 1, 4, 10, "regular"),
        _job("small", 2, 1, 10, "regular"),
    ]
    assert _starts(jobs)["small"] == 2


def test_fair_sharing_orders_the_cohorts_queues_before_priority():
    # At 30 the A100s free up and at 31 Kueue requeues the heads set aside; the regular
    # project already borrows 2 H100s, the exploratory one nothing: the exploratory job goes
    # first (lower dominant resource share with it admitted: 3/8 against (2 + 4)/8),
    # although the regular tier is the higher.
    jobs = [
        _job("holder", 0, 4, 30, "key"),
        _job("h100", 0, 2, 100, "regular", flavor=H100),
        _job("regular", 5, 4, 10, "regular"),
        _job("exploratory", 6, 3, 10, "exploratory"),
    ]
    starts = _starts(jobs)
    assert starts["exploratory"] == 31
    assert starts["regular"] == 42  # the exploratory job ends at 41, the requeue at 42
    # The engine orders by tier first.
    assert _starts(jobs, model=None)["regular"] == 30


def test_a_queue_whose_head_does_not_fit_waits_for_the_other_heads_of_the_cycle():
    # At 2 two A100s are free and three jobs arrive. The regular queue's head (3 GPUs) does
    # not fit; its next job (2) would, and the regular project borrows less — but a cycle
    # takes one head per queue: the exploratory head is admitted first.
    jobs = [
        _job("holder", 0, 2, 20, "key"),
        _job("h100", 0, 2, 100, "exploratory", flavor=H100),
        _job("big", 2, 3, 10, "regular"),
        _job("small", 2, 2, 10, "regular"),
        _job("exploratory", 2, 2, 10, "exploratory"),
    ]
    starts = _starts(jobs)
    assert starts["exploratory"] == 2
    assert starts["small"] > 2


def test_heads_set_aside_wait_for_the_requeue_and_new_work_may_pass_them():
    # The big regular job was set aside at 1. The holder ends at 20; a small exploratory job
    # arriving at 20.5, before Kueue requeues the inadmissible heads (21), takes 2 of the 4
    # freed GPUs; at 21 the big job (3) no longer fits.
    jobs = [
        _job("holder", 0, 4, 20, "key"),
        _job("big", 1, 3, 10, "regular"),
        _job("small", 20.5, 2, 30, "exploratory"),
    ]
    starts = _starts(jobs)
    assert starts["small"] == 20.5
    assert starts["big"] == 51.5  # small ends at 50.5; the requeue a second later


def test_priority_is_the_workload_priority_class_value_not_the_score():
    # One project, two tiers: the regular tier scores higher but its scheduler value (the
    # WorkloadPriorityClass the sync writes) is the lower; Kueue orders by the value.
    tiers = (TierRule("regular", 40), TierRule("exploratory", 10))
    rules = Rules(
        capacity={A100: 4.0},
        tiers=tiers,
        classes=(),
        quotas=(QuotaRule("p", A100, 0.0),),
        project_tiers={"p": "regular"},
    )
    jobs = [
        Job("holder", 0, 4, A100, 10, project="p", tier="regular"),
        Job("regular", 1, 4, A100, 10, project="p", tier="regular"),
        Job("exploratory", 2, 4, A100, 10, project="p", tier="exploratory"),
    ]

    def starts(model: SchedulerModel) -> list[float]:
        return replay(jobs, [(0.0, rules)], model=model).start[1:]

    # Both set aside; requeued a second after each end (10, then 21).
    assert starts(KUEUE) == [11, 22]  # no values: the scores order
    assert starts(SchedulerModel("kueue", priorities={"regular": 100, "exploratory": 500})) == [
        22,
        11,
    ]


def test_a_cycle_takes_one_head_per_cluster_queue_of_all_its_tiers():
    # A project's ClusterQueue holds all its tiers: its head is its highest priority job
    # (regular, 3 GPUs), which does not fit the 2 free A100s; its exploratory job would,
    # and borrows less than the other project's — but it is the queue's next head, for
    # the next cycle: the other project's job is admitted first.
    tiers = (TierRule("regular", 40), TierRule("exploratory", 10))
    rules = Rules(
        capacity={A100: 4.0, H100: 4.0},
        tiers=tiers,
        classes=(),
        quotas=tuple(QuotaRule(p, f, 0.0) for p in ("p", "q") for f in (A100, H100)),
        project_tiers={"p": "regular", "q": "regular"},
    )
    jobs = [
        Job("holder", 0, 2, A100, 20, project="q", tier="regular"),
        Job("q-h100", 0, 2, H100, 100, project="q", tier="exploratory"),
        Job("p-big", 2, 3, A100, 10, project="p", tier="regular"),
        Job("p-small", 2, 2, A100, 10, project="p", tier="exploratory"),
        Job("q-small", 2, 2, A100, 10, project="q", tier="exploratory"),
    ]
    start = replay(jobs, [(0.0, rules)], model=KUEUE).start
    assert start[4] == 2
    assert start[3] > 2


def test_a_queues_oldest_head_of_a_full_flavor_keeps_its_other_flavor_out_of_the_cycle():
    # Seed 84 of the held-out fidelity run, in miniature. A ClusterQueue covers both flavors
    # and has one heap (priority, then arrival): the regular queue's head is its oldest job,
    # 2 A100s, and the A100s are full. At the requeue (11) the key queue's H100 job is
    # admitted although the regular project borrows less: the regular H100 job is its
    # queue's next head, for the next cycle, and by then the H100s are taken. (Per flavor,
    # fair sharing would have admitted the regular H100 job at 11, the key one at 42.)
    jobs = [
        _job("a100-holder", 0, 4, 60, "exploratory"),
        _job("key-borrows", 0, 2, 100, "key", flavor=H100),
        _job("h100-holder", 0, 2, 10, "exploratory", flavor=H100),
        _job("regular-a100", 1, 2, 10, "regular"),
        _job("key-h100", 2, 2, 30, "key", flavor=H100),
        _job("regular-h100", 3, 2, 30, "regular", flavor=H100),
    ]
    starts = _starts(jobs)
    assert starts["key-h100"] == 11
    assert starts["regular-h100"] == 42  # key-h100 ends at 41, the requeue a second later
    assert starts["regular-a100"] == 61


def test_a_head_that_fitted_the_cycles_snapshot_stays_its_queues_head():
    # At 10 the holder ends; at 11 (the requeue) four A100s are free. First cycle, by
    # share: the key head (2) is admitted; the regular head (3) fitted the cycle's snapshot
    # but no longer does: Kueue skips it and puts it back at once, so it is its queue's head
    # again at the next cycle; the exploratory head (1; the project borrows 4 H100s) is
    # admitted. Second cycle: the regular head is set aside, the key queue's next job takes
    # the last GPU; the regular project's 1-GPU job comes a cycle too late.
    jobs = [
        _job("holder", 0, 4, 10, "exploratory"),
        _job("exp-h100", 0, 4, 100, "exploratory", flavor=H100),
        _job("regular-big", 1, 3, 20, "regular"),
        _job("regular-small", 2, 1, 20, "regular"),
        _job("key", 3, 2, 20, "key"),
        _job("exploratory", 4, 1, 20, "exploratory"),
        _job("key-second", 5, 1, 20, "key"),
    ]
    starts = _starts(jobs)
    assert (starts["key"], starts["exploratory"], starts["key-second"]) == (11, 11, 11)
    assert starts["regular-small"] > 11


def test_a_skipped_head_is_still_looked_at_in_the_next_cycle_of_a_requeue():
    # At 10 the holder ends; at 11 (the requeue) three A100s are free. First cycle: the top
    # project's head (the lower share) is admitted; the key head fitted the cycle's snapshot
    # but no longer does, so it is skipped and is its queue's head again at the next cycle,
    # where it preempts its own queue's exploratory work (protected until 11 by its class)
    # and starts at once. It was once set aside there unlooked at (another job of the pass
    # was still to be tried), and waited for the next requeue.
    rules = Rules(
        capacity={A100: 6.0},
        tiers=(
            TierRule("top", 90),
            TierRule("key", 70, may_preempt=True, preemptible=frozenset({"exploratory"})),
            TierRule("exploratory", 10),
        ),
        classes=(ClassRule("cautious", "cautious", min_runtime=11.0),),
        quotas=(
            QuotaRule("p-top", A100, 0.0),
            QuotaRule("p-prod", A100, 1.0, preemption_class="cautious"),
        ),
        project_tiers={"p-top": "top", "p-prod": "key"},
    )

    def job(name: str, at: float, gpus: float, run: float, project: str, tier: str) -> Job:
        return Job(name, at, gpus, A100, run, project=project, tier=tier)

    jobs = [
        job("victim", 0, 1, 1000, "p-prod", "exploratory"),
        job("other", 0, 2, 1000, "p-prod", "exploratory"),
        job("holder", 0, 3, 10, "p-prod", "exploratory"),
        job("top", 1, 2, 100, "p-top", "top"),
        job("key", 2, 2, 100, "p-prod", "key"),
        job("big", 3, 2, 100, "p-prod", "exploratory"),
        job("small", 4, 1, 100, "p-prod", "exploratory"),
    ]
    result = replay(jobs, [(0.0, rules)], model=KUEUE)
    starts = {job.name: start for job, start in zip(jobs, result.start, strict=True)}
    assert (starts["top"], starts["key"]) == (11, 11)
    assert result.preempted_by == [(0, 4, 11.0, "tier")]


def _outcome(result: Result) -> str:
    """The digest of everything a replay decided (``bench/replay.py`` prints it per size)."""
    return outcome(result)


def _mixed_rules(switch: bool) -> Rules:
    tiers = (
        TierRule("key", 70, may_preempt=True, preemptible=frozenset({"exploratory"})),
        TierRule("regular", 40, aging_after=20, aging_step=10, aging_cap=70),
        TierRule("exploratory", 10, max_gpus_total=6.0 if switch else None),
    )
    return Rules(
        capacity={A100: 8.0, H100: 6.0},
        tiers=tiers,
        classes=(),
        quotas=tuple(
            QuotaRule(
                f"p-{tier.slug}",
                flavor,
                2.0,
                borrow_limit=None if tier.slug == "key" else 4.0,
                fair_share_weight=1 + n,
            )
            for n, tier in enumerate(tiers)
            for flavor in (A100, H100)
        ),
        project_tiers={f"p-{tier.slug}": tier.slug for tier in tiers},
    )


def _mixed_outcome(seed: int, model: SchedulerModel = KUEUE) -> str:
    jobs = [
        Job(
            f"j{n}",
            lab.offset,
            float(lab.gpus),
            f"lab/{lab.gpu_type}",
            float(lab.seconds),
            project=f"p-{lab.tier}",
            tier=lab.tier,
            patience=60.0 if n % 7 == 0 else None,
        )
        for n, lab in enumerate(mixed_workload(seed, jobs=300, span=600.0, seconds=(5, 90)))
    ]
    timeline = [(0.0, _mixed_rules(False)), (300.0, _mixed_rules(True))]
    return _outcome(replay(jobs, timeline, model=model))


# Pinned when the model was made faster (issue 38): the faster model decides exactly as the
# one it replaced, on mixed workloads (aging, borrowing, preemption, cancellations, a rule
# switch) and on the bench's pool. The bench's pool changed once since (its lending limits):
# a head the lending limits hold is set aside as Kueue does, no longer held in its queue.
# With Kueue's fair-sharing preemption (``kueue_fair``) the model preempts as Kueue does, not
# as the engine (tier preemption across projects, reclaim after the grace): on the mixed
# workloads 245, 235, 245 and 254 of 300 jobs start otherwise (753, 305, 752 and 153
# preemptions, were 103, 67, 87 and 79), on the bench's pool 1,781 of 6,015 (5,443
# preemptions, were 46). ``KueueSettings(fair_sharing=False)`` gave the old digests.
# Re-pinned when the cycles became per ClusterQueue across its flavors (issue 38): a queue's
# head is its first job over all the pool's flavors, a head skipped in a cycle stays the
# head, a workload evicted in an instant preempts nothing in it: on the mixed workloads
# (dense, preemption cascading) 225, 230, 225 and 210 of 300 jobs start otherwise.
# Re-pinned when a workload admitted through preemption stopped being a target in the instant
# it preempted (issue 38: Kueue admits it a cycle after its targets' eviction ended; the lab's
# busy scenario showed the model taking it back at once): on the mixed workloads (dense,
# preemption cascading) 190, 204, 202 and 246 of 300 jobs start otherwise (267, 216, 532 and
# 209 preemptions, were 649, 432, 404 and 184); on the bench's 6,015-job pool 5,296
# preemptions, were 5,341.
MIXED = {1: "d4fabfcb334e676d", 2: "c9c22e137fcd757c", 3: "647828a51c4f25ac", 4: "4da01bda5e402754"}
BENCH = "0b00d570366b6b83"
# Re-pinned when a head skipped in a requeue's cycle stayed live for the next cycle (issue
# 38; it was set aside unlooked at when no other head of that cycle was live): the mixed
# workloads with fair sharing and the bench's 6,015-job pool decide as before; without fair
# sharing 51 of seed 1's 300 jobs start otherwise (seeds 3 and 4: the same starts, other
# reasons said).
CLASSIC = SchedulerModel("kueue", kueue=KueueSettings(fair_sharing=False))
MIXED_CLASSIC = {
    1: "b47caf5f2b16b5be",
    2: "b3cbb520a5616bae",
    3: "279030a9bc573a0c",
    4: "bc42d4d947eda5b1",
}


def test_the_model_decides_as_pinned_on_seeded_mixed_workloads():
    assert {seed: _mixed_outcome(seed) for seed in MIXED} == MIXED


def test_without_fair_sharing_the_model_decides_as_pinned():
    assert {seed: _mixed_outcome(seed, CLASSIC) for seed in (1, 2)} == {
        seed: MIXED_CLASSIC[seed] for seed in (1, 2)
    }


def test_the_model_decides_as_pinned_on_the_bench_pool():
    rules = bench_rules()
    loads, days = scaled(bench_loads(rules), 5000, 0.9)
    jobs = generate(loads, start=START, days=days, seed=5000)
    assert _outcome(replay(jobs, [(START, rules)], model=KUEUE)) == BENCH


def _lending_rules(lending_limit: float | None, preemption_class: str = "") -> Rules:
    """Four A100s: the owner's guarantee 3 (lending up to ``lending_limit``), the borrower's 1."""
    return Rules(
        capacity={A100: 4.0},
        tiers=(TierRule("regular", 40),),
        classes=(ClassRule("never", "forbidden"),),
        quotas=(
            QuotaRule("owner", A100, 3.0, lending_limit=lending_limit),
            QuotaRule("borrower", A100, 1.0, preemption_class=preemption_class),
        ),
        project_tiers={"owner": "regular", "borrower": "regular"},
    )


def _borrower_jobs() -> list[Job]:
    # The borrower's head wants 2 GPUs, one more than its guarantee; its next job fits it.
    return [
        Job("head", 0, 2, A100, 10, project="borrower", tier="regular"),
        Job("next", 1, 1, A100, 10, project="borrower", tier="regular"),
    ]


def test_a_head_the_lending_limits_hold_is_passed_over_in_its_own_queue():
    # The owner lends nothing: the head cannot borrow (AccountingPolicy), although three
    # GPUs are idle. Kueue finds it no fit, sets it aside, and admits the queue's next job.
    rules = _lending_rules(lending_limit=0.0)
    result = replay(_borrower_jobs(), [(0.0, rules)], model=KUEUE)
    assert result.start[1] == 1
    assert (0, 0.0, "AccountingPolicy") in result.reasons
    # The engine keeps the queue's order: the next job waits behind the head.
    assert replay(_borrower_jobs(), [(0.0, rules)]).start[1] != 1


def test_never_preempt_work_over_its_guarantee_does_not_block_its_queue():
    # Found by the property test (CI's fixed examples): never-preempt work never borrows,
    # so a head over its guarantee can never start; the jobs behind it still do.
    rules = _lending_rules(lending_limit=None, preemption_class="never")
    result = replay(_borrower_jobs(), [(0.0, rules)], model=KUEUE)
    assert result.start[1] == 1
    assert math.isnan(result.start[0])
    assert [token for job, _, token in result.reasons if job == 0] == ["AccountingPolicy"]
