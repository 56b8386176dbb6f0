"""The replay engine (``queues.replay``) on small scenarios whose outcome is worked out by hand."""

import math
import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from queues.replay import ClassRule, Job, QuotaRule, Rules, TierRule, replay
from queues.replay.engine import REASON_CATEGORY
from queues.replay.workload import ProjectLoad, generate, mean_gpu_hours_per_hour
from queues.schedulers.classify import classify_slurm

F = "main/h100"
MIN = 60.0

TIERS = (
    TierRule("prod", 90, may_preempt=True, preemptible=frozenset({"explore"})),
    TierRule("key", 70),
    TierRule("regular", 50, aging_after=10 * MIN, aging_step=10, aging_cap=65),
    TierRule("explore", 10),
)
CLASSES = (
    ClassRule("allowed"),
    ClassRule("ckpt", checkpoint_interval=10 * MIN),
    ClassRule("cautious", "cautious", min_runtime=30 * MIN, max_per_day=1),
    ClassRule("never", "forbidden"),
)


def rules(*quotas: QuotaRule, capacity: float = 8, **extra: object) -> Rules:
    values: dict[str, object] = {
        "capacity": {F: capacity},
        "tiers": TIERS,
        "classes": CLASSES,
        "quotas": quotas,
        "project_tiers": {"a": "prod", "b": "key", "c": "regular", "e": "explore"},
        "default_tier": "regular",
        "default_class": "allowed",
    }
    values.update(extra)
    return Rules(**values)  # type: ignore[arg-type]


def job(name: str, at: float, gpus: float, minutes: float, project: str, tier: str = "") -> Job:
    return Job(name, at * MIN, gpus, F, minutes * MIN, project, tier, user=f"{project}-u")


def starts(result) -> dict[str, float]:  # type: ignore[no-untyped-def]
    return {j.name: s / MIN for j, s in zip(result.jobs, result.start, strict=True)}


def reasons(result, name: str) -> list[tuple[float, str]]:  # type: ignore[no-untyped-def]
    index = [j.name for j in result.jobs].index(name)
    return [(since / MIN, token) for since, token in result.reasons_of(index)]


def test_every_reason_token_is_in_the_evidence_category_the_classifier_gives():
    for token, category in REASON_CATEGORY.items():
        assert classify_slurm(token).category == category, token


def test_a_higher_tier_starts_first_when_gpus_free_up():
    jobs = [
        job("fill", 0, 8, 60, "c"),
        job("low", 1, 8, 10, "e"),
        job("high", 2, 8, 10, "b"),
    ]
    result = replay(jobs, [(0, rules())])
    assert starts(result) == {"fill": 0, "high": 60, "low": 70}
    assert reasons(result, "low") == [
        (1, "Resources"),
        (2, "Priority"),
        (60, "Resources"),
        (70, ""),
    ]
    assert reasons(result, "high")[0] == (2, "Resources")


def test_aging_raises_a_waiting_job_up_to_its_cap_and_no_further():
    # "old" (regular, 50) waits: 100 would pass "key" (70) by then, but the cap is 65.
    jobs = [job("fill", 0, 8, 60, "e"), job("old", 1, 8, 10, "c"), job("key", 30, 8, 10, "b")]
    result = replay(jobs, [(0, rules())])
    assert starts(result)["key"] == 60 and starts(result)["old"] == 70
    # With a cap above "key" it would have got there first (older arrival breaks the tie).
    aged = tuple(
        TierRule("regular", 50, aging_after=10 * MIN, aging_step=10, aging_cap=80)
        if t.slug == "regular"
        else t
        for t in TIERS
    )
    result = replay(jobs, [(0, rules(tiers=aged))])
    assert starts(result)["old"] == 60 and starts(result)["key"] == 70


def test_caps_hold_jobs_back_with_their_quota_reasons():
    tiers = (
        TierRule("prod", 90),
        TierRule("key", 70, max_gpus_per_job=4),
        TierRule("regular", 50, max_gpus_total=3),
        TierRule("explore", 10, max_gpus_per_user=2),
    )
    quotas = (QuotaRule("a", F, 2, borrow_limit=1),)
    jobs = [
        job("too-big", 0, 5, 10, "b"),  # above the per-job cap: never starts
        job("r1", 0, 2, 30, "c"),
        job("r2", 0, 2, 30, "c"),  # tier total 3: waits for r1
        job("u1", 0, 2, 30, "e"),
        job("u2", 0, 1, 30, "e"),  # per-user 2: waits for u1
        job("a1", 0, 2, 30, "a"),
        job("a2", 0, 2, 30, "a"),  # project maximum 3: waits for a1
    ]
    result = replay(jobs, [(0, rules(*quotas, capacity=100, tiers=tiers))])
    got = starts(result)
    assert math.isnan(got["too-big"])
    assert reasons(result, "too-big") == [(0, "QOSMaxGRESPerJob")]
    assert got == pytest.approx(
        {"too-big": math.nan, "r1": 0, "r2": 30, "u1": 0, "u2": 30, "a1": 0, "a2": 30},
        nan_ok=True,
    )
    assert reasons(result, "r2")[0] == (0, "QOSGrpGRES")
    assert reasons(result, "u2")[0] == (0, "QOSMaxGRESPerUser")
    assert reasons(result, "a2")[0] == (0, "AssocGrpGRES")


def test_a_guarantee_is_reclaimed_after_its_grace_and_the_borrower_requeued():
    quotas = (
        QuotaRule("c", F, 4, reclaim_grace=15 * MIN, preemption_class="ckpt"),
        QuotaRule("e", F, 4, preemption_class="ckpt"),
    )
    # "e" borrows c's idle guarantee; c then asks for it back.
    jobs = [job("borrow", 0, 8, 60, "e"), job("owner", 20, 4, 10, "c")]
    result = replay(jobs, [(0, rules(*quotas))])
    assert starts(result) == {"borrow": 0, "owner": 35}
    assert reasons(result, "owner") == [(20, "Resources"), (35, "")]
    assert result.preemptions == [1, 0]
    assert result.preempted_by == [(0, 1, 35 * MIN, "reclaim")]
    # Ran 35 minutes with a checkpoint every 10: 5 minutes of 8 GPUs lost.
    assert result.lost_gpu_seconds[0] == pytest.approx(5 * MIN * 8)
    # Restarted when the owner finished, with the 30 minutes it had left (+ 5 lost).
    assert result.end[0] / MIN == pytest.approx(45 + 30)


def test_a_never_preempt_lower_tier_does_not_hold_back_the_reclaim_of_a_guarantee():
    """A prod job may preempt explore, but the only explore job is never-preempt: that finds
    no tier victim. Its reclaim, after the grace, still takes its guarantee back from the
    borrower (found by the grace property test: the two looked for victims shared one memo,
    and the tier preemption's "none, ever" stopped the reclaim)."""
    quotas = (
        QuotaRule("a", F, 1, reclaim_grace=5 * MIN, preemption_class="allowed"),
        QuotaRule("e", F, 4, lending_limit=0, preemption_class="never"),
        QuotaRule("c", F, 0, preemption_class="ckpt"),
    )
    # "c" borrows a's idle guarantee; "e" fills its own; then "a" asks for its guarantee.
    jobs = [job("e1", 0, 4, 60, "e"), job("borrow", 0, 1, 120, "c"), job("owner", 10, 1, 10, "a")]
    result = replay(jobs, [(0, rules(*quotas, capacity=5))])
    assert starts(result) == {"e1": 0, "borrow": 0, "owner": 15}
    assert reasons(result, "owner") == [(10, "Resources"), (15, "")]
    assert result.preempted_by == [(1, 2, 15 * MIN, "reclaim")]
    # Ran 15 minutes with a checkpoint every 10: 5 lost; restarted when the owner finished.
    assert result.end[1] / MIN == pytest.approx(25 + 105 + 5)


def test_a_lower_tier_job_within_its_guarantee_goes_before_a_higher_one_that_would_borrow():
    # Kueue's order between projects: work within its project's guarantee first, then the
    # tier. b's key-project job "big" would borrow from a pool that has nothing left to lend;
    # c's later exploratory job "small" fits in c's idle guarantee and starts first.
    quotas = (QuotaRule("c", F, 4),)
    jobs = [
        job("borrow", 0, 4, 60, "b"),
        job("mine", 0, 2, 60, "c"),
        job("big", 1, 4, 10, "b"),
        job("small", 2, 2, 10, "c", tier="explore"),
    ]
    result = replay(jobs, [(0, rules(*quotas))])
    assert starts(result) == {"borrow": 0, "mine": 0, "big": 60, "small": 2}
    assert reasons(result, "big") == [(1, "Resources"), (60, "")]
    # Without the guarantee both would borrow: the tier decides, and "small" waits.
    result = replay(jobs, [(0, rules())])
    assert starts(result)["big"] == 60 and starts(result)["small"] == 60
    assert reasons(result, "small")[0] == (2, "Priority")


def test_a_lower_tier_job_does_not_pass_its_own_projects_waiting_higher_tier_work():
    # c's regular queue: "big" would borrow from a full pool and waits; behind it "next"
    # would fit in c's idle guarantee. c's exploratory "small" fits there too, but is of a
    # lower tier: within one project (one Kueue ClusterQueue, ordered by priority) it may not
    # go before the project's regular work. Only when c's regular work has started does it.
    quotas = (QuotaRule("c", F, 4),)
    jobs = [
        job("borrow", 0, 4, 60, "b"),
        job("mine", 0, 1, 60, "c"),
        job("big", 1, 4, 10, "c"),
        job("next", 2, 2, 10, "c"),
        job("small", 3, 2, 10, "c", tier="explore"),
    ]
    result = replay(jobs, [(0, rules(*quotas))])
    assert starts(result) == {"borrow": 0, "mine": 0, "big": 60, "next": 60, "small": 60}
    assert reasons(result, "small")[0] == (3, "Priority")


def test_never_preempt_work_never_borrows_and_is_never_preempted():
    quotas = (
        QuotaRule("e", F, 4, preemption_class="never"),
        QuotaRule("a", F, 4, preemption_class="allowed"),
    )
    jobs = [job("e1", 0, 4, 60, "e"), job("e2", 0, 4, 60, "e"), job("a1", 5, 8, 10, "a")]
    result = replay(jobs, [(0, rules(*quotas))])
    # e2 would borrow a's idle guarantee: never-preempt work may not.
    assert reasons(result, "e2")[0] == (0, "AccountingPolicy")
    # prod may preempt explore, but e1 is never-preempt: a1 waits for it, then for e2,
    # which runs within its guarantee and so goes first.
    assert starts(result) == {"e1": 0, "e2": 60, "a1": 120}
    assert result.preemptions == [0, 0, 0]


def test_cautious_work_is_preempted_only_after_its_minimum_runtime_and_daily_maximum():
    quotas = (QuotaRule("e", F, 0, preemption_class="cautious"), QuotaRule("a", F, 8))
    jobs = [
        job("e1", 0, 8, 600, "e"),
        job("a1", 10, 8, 10, "a"),  # e1 has run 10 of its 30 protected minutes
        job("a2", 50, 8, 10, "a"),  # e1 already preempted once today: waits for it
    ]
    result = replay(jobs, [(0, rules(*quotas))])
    got = starts(result)
    assert got["a1"] == 30  # reclaim (grace 0) waits for the minimum runtime
    assert result.preemptions[0] == 1
    assert got["a2"] > 60 * 10  # behind e1, which may not be preempted twice a day


def test_lending_limits_hold_idle_gpus_for_their_owner():
    quotas = (QuotaRule("a", F, 6, lending_limit=2), QuotaRule("e", F, 2))
    jobs = [job("e1", 0, 4, 10, "e"), job("e2", 0, 2, 10, "e")]
    result = replay(jobs, [(0, rules(*quotas))])
    assert starts(result) == {"e1": 0, "e2": 10}
    assert reasons(result, "e2")[0] == (0, "AccountingPolicy")
    # a: 6 GPUs idle all the time, 2 of them lent for 10 minutes.
    assert result.borrowed_gpu_seconds[("e", F)] == pytest.approx(2 * 10 * MIN)
    assert result.idle_gpu_seconds[F] == pytest.approx((4 * 10 + 6 * 10) * MIN)


def test_a_grant_raises_a_named_job_only_inside_its_window():
    base = rules()
    granted = rules(job_tiers={"late": "prod"})
    jobs = [job("fill", 0, 8, 30, "c"), job("early", 1, 8, 10, "b"), job("late", 2, 8, 10, "e")]
    window = [(0.0, base), (20 * MIN, granted), (100 * MIN, base)]
    result = replay(jobs, window)
    assert starts(result) == {"fill": 0, "late": 30, "early": 40}
    assert result.tiers[2] == "prod"
    outside = [(0.0, base), (40 * MIN, granted)]
    assert starts(replay(jobs, outside)) == {"fill": 0, "early": 30, "late": 40}


def test_tier_preemption_picks_the_lowest_tier_and_youngest_first():
    quotas = (QuotaRule("e", F, 0), QuotaRule("a", F, 4))
    jobs = [
        job("old", 0, 4, 100, "e"),
        job("young", 5, 4, 100, "e"),
        job("urgent", 10, 4, 10, "a"),
    ]
    result = replay(jobs, [(0, rules(*quotas))])
    assert result.preemptions == [0, 1, 0]
    assert starts(result)["urgent"] == 10
    assert result.preempted_by[0][3] in {"tier", "reclaim"}


def test_the_replay_is_deterministic_and_refuses_bad_input():
    loads = [
        ProjectLoad("a", "prod", F, 2, {1.0: 1, 2.0: 1}, 30),
        ProjectLoad("e", "explore", F, 6, {0.5: 1, 1.0: 1}, 60),
    ]
    jobs = generate(loads, start=0, days=2, seed=3)
    assert jobs == generate(loads, start=0, days=2, seed=3)
    assert mean_gpu_hours_per_hour(loads) > 0
    one = replay(jobs, [(0, rules(capacity=4))])
    two = replay(jobs, [(0, rules(capacity=4))])
    assert one.start == two.start and one.reasons == two.reasons
    with pytest.raises(ValueError, match="unknown flavor"):
        replay([Job("x", 0, 1, "other", 1, "a")], [(0, rules())])
    with pytest.raises(ValueError, match="GPUs > 0"):
        replay([Job("x", 0, 0, F, 1, "a")], [(0, rules())])
    with pytest.raises(ValueError, match="unknown class"):
        replay([], [(0, rules(QuotaRule("a", F, 1, preemption_class="nope")))])
    with pytest.raises(ValueError, match="time order"):
        replay([], [(10, rules()), (0, rules())])


def test_a_replay_stopped_at_a_moment_leaves_jobs_running_and_waiting():
    jobs = [job("run", 0, 8, 60, "c"), job("wait", 1, 8, 60, "c"), job("later", 90, 1, 1, "c")]
    result = replay(jobs, [(0, rules())], until=30 * MIN)
    assert starts(result)["run"] == 0 and math.isnan(result.end[0])
    assert math.isnan(result.start[1]) and result.reasons_of(1) == [(1 * MIN, "Resources")]
    assert result.runs == [(0, 0.0, 30 * MIN)]
    assert result.used_gpu_seconds[("c", F)] == pytest.approx(8 * 30 * MIN)


def test_a_user_gives_up_on_a_job_that_waits_past_its_patience():
    jobs = [
        job("run", 0, 8, 60, "c"),
        Job("gives-up", 1 * MIN, 8, F, 10 * MIN, "c", patience=30 * MIN),
        Job("patient", 2 * MIN, 8, F, 10 * MIN, "c", patience=90 * MIN),
    ]
    result = replay(jobs, [(0, rules())])
    assert result.cancelled == {1: 31 * MIN}
    assert math.isnan(result.start[1]) and math.isnan(result.end[1])
    assert starts(result)["patient"] == 60


DETERMINISM_SCRIPT = """
import hashlib, sys
sys.path.insert(0, "bench")
from replay import START, bench_loads, bench_rules, scaled
from queues.replay import replay
from queues.replay.workload import generate
rules = bench_rules()
loads, days = scaled(bench_loads(rules), 10000, 0.9)
result = replay(generate(loads, start=START, days=days, seed=1), [(START, rules)])
print(hashlib.sha256(repr((result.start, result.end, result.reasons)).encode()).hexdigest())
"""


def test_the_same_replay_in_two_processes_gives_the_same_result():
    """The engine never decides by a set's order of strings, which changes with the process's
    hash seed: the benchmark's rich rule set (tiers, caps, aging, lending, classes), replayed
    in two processes with different seeds, gives the same starts, ends and reasons."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    digests = {
        subprocess.run(
            [sys.executable, "-c", DETERMINISM_SCRIPT],
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout.strip()
        for seed in ("1", "2", "3")
    }
    assert len(digests) == 1, digests


@contextmanager
def finishes_within(seconds: int) -> Iterator[None]:
    """Fail, rather than hang the suite, if the block runs longer (a replay that loops)."""

    def stop(*_args: object) -> None:
        raise AssertionError(f"the replay did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_job_is_not_traded_back_and_forth_between_two_rules_in_one_instant():
    """Guarantees above the pool (which Arbiter's own rules refuse, but a replay's rules are
    plain values) let a tier's preemption take a guaranteed job and its guarantee's reclaim
    take it back, forever in one instant (found by a random replay: it never ended). A job
    preempted in an instant is not a victim again in it."""
    x, y = "a/x", "a/y"
    tiers = (
        TierRule("t0", 22, max_gpus_total=4.0, may_preempt=True, preemptible=frozenset({"t1"})),
        TierRule("t1", 14, max_gpus_per_user=3.0),
    )
    classes = (ClassRule("ok"), ClassRule("caut", "cautious"), ClassRule("never", "forbidden"))
    quotas = (
        QuotaRule("p0", x, 2, borrow_limit=2),
        QuotaRule("p0", y, 3, borrow_limit=5, lending_limit=1, fair_share_weight=2),
        QuotaRule("p2", y, 3, borrow_limit=5, lending_limit=2, preemption_class="never"),
        QuotaRule("p3", x, 1, borrow_limit=5, lending_limit=2, preemption_class="ok"),
        QuotaRule("p3", y, 4, borrow_limit=2, lending_limit=0, preemption_class="caut"),
        QuotaRule("p4", x, 1, borrow_limit=0, lending_limit=0, reclaim_grace=10),
        QuotaRule("p4", y, 1, borrow_limit=2, lending_limit=0, preemption_class="never"),
    )
    over = Rules(
        capacity={x: 4.0, y: 4.0},
        tiers=tiers,
        classes=classes,
        quotas=quotas,
        project_tiers={"p0": "t0", "p1": "t0", "p2": "t0", "p3": "t1", "p4": "t1"},
        default_tier="t1",
        default_class="ok",
    )

    def run(name: str, at: float, gpus: float, flavor: str, seconds: float, project: str) -> Job:
        return Job(name, at, gpus, flavor, seconds, project, user="u")

    jobs = [
        run("j0", 47.688, 2, x, 60, "p2"),
        Job("j8", 126.0, 1, y, 30, "p2", "t1", user="u"),
        run("j9", 34.743, 1, y, 30, "p0"),
        Job("j38", 42.0, 1, y, 120, "p0", "t1", user="u"),
        Job("j41", 136.921, 1, y, 1, "p3", user="u", patience=20),
        Job("j42", 55.5, 1, x, 60, "p0", user="u", patience=20),
        run("j52", 54.2, 0.5, y, 30, "p1"),
        Job("j67", 22.593, 1, y, 120, "p2", user="u", patience=20),
    ]
    with finishes_within(20):
        result = replay(jobs, [(0, over)])
    # Every job ran to its end, and no job lost its GPUs twice in one instant.
    assert not any(math.isnan(end) for end in result.end)
    instants = [(victim, at) for victim, _by, at, _why in result.preempted_by]
    assert len(instants) == len(set(instants))


def test_an_aging_step_rounded_onto_an_event_does_not_repeat_that_instant():
    """At 0.1 + 3 × 0.7 s (2.1999999999999997 in floats) the waiting job has aged 2 steps by
    the key's count, while its third step's boundary, computed in floats, falls on that very
    instant: the wake asked for it again and again, and the replay never ended."""
    aging = (
        TierRule("key", 70),
        TierRule("regular", 50, aging_after=0.7, aging_step=1, aging_cap=70),
    )
    rounding = Rules(
        capacity={F: 1},
        tiers=aging,
        classes=(ClassRule("allowed"),),
        quotas=(),
        project_tiers={"a": "key", "c": "regular"},
        default_tier="regular",
        default_class="allowed",
    )
    at = 0.1 + 3 * 0.7
    jobs = [
        Job("run", 0, 1, F, 100, "a"),
        Job("aging", 0.1, 1, F, 10, "c"),
        Job("other", at, 1, F, 10, "a"),
    ]
    with finishes_within(20):
        result = replay(jobs, [(0, rounding)])
    assert result.start == [0, 100, 110]


def test_rules_refuse_aging_without_a_cap():
    """As a tier's own rule does: uncapped aging of a job that can never start would wake the
    replay step after step, forever."""
    uncapped = (TierRule("key", 70), TierRule("regular", 50, aging_after=60, aging_step=5))
    with pytest.raises(ValueError, match="ages without a cap"):
        replay([], [(0, rules(tiers=uncapped))])
