"""The Kueue model of the replay (``queues.replay.kueue_model``), by hand: BestEffortFIFO
(a head that does not fit is passed over, in its own queue and in the cohort's others) and
fair sharing ordering the cohort's queues before priority, as the lab's Kueue 0.17 does."""

from queues.replay import Job, QuotaRule, Rules, TierRule, replay
from queues.replay.scheduler_model import SchedulerModel

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
    assert _starts(jobs) == {"running": 0, "big": 60, "small": 2}
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
    # At 30 the A100s free up; the regular project already borrows 2 H100s, the exploratory
    # one nothing: the exploratory job goes first (lower dominant resource share with it
    # admitted: 3/8 against (2 + 4)/8), although the regular tier is the higher.
    jobs = [
        _job("holder", 0, 4, 30, "key"),
        _job("h100", 0, 2, 100, "regular", flavor=H100),
        _job("regular", 5, 4, 10, "regular"),
        _job("exploratory", 6, 3, 10, "exploratory"),
    ]
    starts = _starts(jobs)
    assert starts["exploratory"] == 30
    assert starts["regular"] == 40
    # The engine orders by tier first.
    assert _starts(jobs, model=None)["regular"] == 30


def test_a_queue_whose_head_does_not_fit_waits_for_the_other_heads_of_the_cycle():
    # At 2 two A100s are free. The regular queue's head (3 GPUs) does not fit; its next job
    # (2) would, and the regular project borrows less — but a cycle takes one head per
    # queue: the exploratory head is admitted first, as the lab's Kueue did.
    jobs = [
        _job("holder", 0, 2, 20, "key"),
        _job("h100", 0, 2, 100, "exploratory", flavor=H100),
        _job("big", 1, 3, 10, "regular"),
        _job("small", 2, 2, 10, "regular"),
        _job("exploratory", 2, 2, 10, "exploratory"),
    ]
    starts = _starts(jobs)
    assert starts["exploratory"] == 2
    assert starts["small"] > 2
