"""Properties every replay must keep, checked on random pools, rules and jobs (hypothesis).

Each property is checked against the replay's output (its runs, starts and reasons), not
against the engine's own bookkeeping:

- no project ever holds more than its maximum (guarantee + borrow limit), no tier more than
  its cap, the pool never more than it has;
- never-preempt (forbidden) work is never preempted;
- a project's guarantee is given back within its reclaim grace: the first waiting job of a
  project's queue (its earliest job of its highest waiting tier) that fits in its idle
  guarantee while others borrow starts within the grace
  (here with allowed and never-preempt classes only: cautious work may hold it longer, by
  design, and the engine's unit tests show by how much);
- a higher tier never waits behind a lower one for the same flavor unless a rule explains
  it: the higher job was held by a quota limit (its reason then says so), or it waited behind
  an earlier job of its own project and tier, or the lower job, of another project, ran
  within its project's guarantee (a project's own lower tier never passes it that way: a
  project is one queue ordered by tier), or aging had raised the lower job at least as high.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from queues.replay import ClassRule, Job, QuotaRule, Rules, TierRule, replay
from queues.replay.engine import REASON_CATEGORY, Result
from queues.replay.scheduler_model import SchedulerModel
from tests.queues.bounded import finishes_within

F = "p/gpu"
MIN = 60.0
EPS = 1e-6
PROJECTS = ("a", "b", "c", "d")
CLASSES = (
    ClassRule("allowed", checkpoint_interval=5 * MIN),
    ClassRule("cautious", "cautious", min_runtime=20 * MIN, max_per_day=2),
    ClassRule("never", "forbidden"),
)


@st.composite
def scenarios(
    draw: st.DrawFn,
    classes: tuple[str, ...] = ("allowed", "cautious", "never"),
    over_the_pool: bool = False,
):
    """Random rules and jobs; ``over_the_pool``: guarantees drawn each up to the pool's size,
    so together they may exceed it (Arbiter's rules refuse that; a replay's need not)."""
    capacity = draw(st.integers(4, 24))
    tier_cap = draw(st.one_of(st.none(), st.integers(2, capacity)))
    user_cap = draw(st.one_of(st.none(), st.integers(2, 8)))
    aging = draw(st.booleans())
    tiers = (
        TierRule("high", 90, may_preempt=True, preemptible=frozenset({"low"})),
        TierRule(
            "mid",
            50,
            max_gpus_total=tier_cap,
            aging_after=15 * MIN if aging else None,
            aging_step=10 if aging else 0,
            aging_cap=70 if aging else None,
        ),
        TierRule("low", 10, max_gpus_per_user=user_cap),
    )
    left = capacity
    quotas = []
    for project in PROJECTS:
        guarantee = draw(st.integers(0, capacity if over_the_pool else left))
        left -= 0 if over_the_pool else guarantee
        quotas.append(
            QuotaRule(
                project=project,
                flavor=F,
                guarantee=guarantee,
                borrow_limit=draw(st.one_of(st.none(), st.integers(0, capacity))),
                lending_limit=draw(st.one_of(st.none(), st.integers(0, guarantee))),
                fair_share_weight=draw(st.integers(1, 3)),
                reclaim_grace=draw(st.sampled_from([0, 5, 30])) * MIN,
                preemption_class=draw(st.sampled_from(classes)),
            )
        )
    rules = Rules(
        capacity={F: float(capacity)},
        tiers=tiers,
        classes=CLASSES,
        quotas=tuple(quotas),
        project_tiers={project: "high" for project in PROJECTS},
        default_tier="low",
        default_class="allowed",
        requeue_cost=draw(st.sampled_from([0, 2])) * MIN,
    )
    count = draw(st.integers(1, 30))
    jobs = [
        Job(
            name=f"j{n}",
            arrival=draw(st.integers(0, 240)) * MIN,
            gpus=draw(st.sampled_from([0.5, 1, 2, 3, 4, 8])),
            flavor=F,
            duration=draw(st.integers(1, 120)) * MIN,
            project=draw(st.sampled_from(PROJECTS)),
            tier=draw(st.sampled_from(["high", "mid", "low"])),
            user=f"u{draw(st.integers(0, 2))}",
        )
        for n in range(count)
    ]
    return rules, jobs


def moments(result: Result) -> list[float]:
    times = {job.arrival for job in result.jobs}
    for _, start, end in result.runs:
        times.update((start, end))
    return sorted(times)


def running_at(result: Result, t: float) -> list[int]:
    return [j for j, start, end in result.runs if start <= t < end]


def pending_at(result: Result, t: float) -> list[int]:
    running = set(running_at(result, t))
    pending = []
    for j, job in enumerate(result.jobs):
        if job.arrival > t or j in running:
            continue
        if not math.isnan(result.end[j]) and result.end[j] <= t:
            continue
        pending.append(j)
    return pending


def usage(result: Result, t: float) -> dict[str, float]:
    used: dict[str, float] = {}
    for j in running_at(result, t):
        project = result.jobs[j].project
        used[project] = used.get(project, 0.0) + result.jobs[j].gpus
    return used


def reasons_at(result: Result, j: int, t: float) -> set[str]:
    """What ``j`` waited on at ``t``: the reason in force before, and any said at ``t``."""
    said = ""
    now = set()
    for since, token in result.reasons_of(j):
        if since < t:
            said = token
        elif since == t:
            now.add(token)
    return {said} | now


def held_by_quota(result: Result, j: int, t: float) -> bool:
    return any(REASON_CATEGORY.get(token) == "quota" for token in reasons_at(result, j, t))


SETTINGS = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def within_pool_and_maximums(rules: Rules, jobs: list[Job], result: Result, t: float) -> list[int]:
    """Asserts that at ``t`` the pool holds no more than it has and no project more than its
    maximum; returns the jobs running then."""
    running = running_at(result, t)
    assert sum(jobs[j].gpus for j in running) <= rules.capacity[F] + EPS
    maximum = {quota.project: quota.maximum for quota in rules.quotas}
    for project, used in usage(result, t).items():
        most = maximum[project]
        assert most is None or used <= most + EPS, (project, t)
    return running


@SETTINGS
@given(scenarios())
def test_no_project_tier_or_pool_ever_holds_more_than_it_may(scenario):
    rules, jobs = scenario
    result = replay(jobs, [(0.0, rules)])
    tiers = {tier.slug: tier for tier in rules.tiers}
    for t in moments(result):
        running = within_pool_and_maximums(rules, jobs, result, t)
        by_tier: dict[str, float] = {}
        for j in running:
            by_tier[result.tiers[j]] = by_tier.get(result.tiers[j], 0.0) + jobs[j].gpus
        for slug, used in by_tier.items():
            cap = tiers[slug].max_gpus_total
            assert cap is None or used <= cap + EPS, (slug, t)
    # Every job ran exactly what it asked for, plus its losses; none ran twice at once.
    for j, job in enumerate(jobs):
        runs = sorted((s, e) for k, s, e in result.runs if k == j)
        for (_, e1), (s2, _) in itertools.pairwise(runs):
            assert e1 <= s2
        if not math.isnan(result.end[j]):
            ran = sum(e - s for s, e in runs)
            lost = result.lost_gpu_seconds[j] / job.gpus
            assert ran == pytest.approx(job.duration + lost, abs=1e-6)
    for _, _, token in result.reasons:
        assert token == "" or token in REASON_CATEGORY


@SETTINGS
@given(scenarios())
def test_the_kueue_model_holds_no_more_than_may_be_and_starts_what_fits(scenario):
    """The Kueue model (heads set aside, requeued a second after an end) keeps the same
    limits, never preempts never-preempt work, and starts every job the engine starts (a
    head set aside is not forgotten)."""
    rules, jobs = scenario
    result = replay(jobs, [(0.0, rules)], model=SchedulerModel("kueue"))
    for t in moments(result):
        within_pool_and_maximums(rules, jobs, result, t)
    never = {quota.project for quota in rules.quotas if quota.preemption_class == "never"}
    for victim, _, _, _ in result.preempted_by:
        assert jobs[victim].project not in never
    engine = replay(jobs, [(0.0, rules)])
    for j, job in enumerate(jobs):
        if job.patience is None and not math.isnan(engine.start[j]):
            assert not math.isnan(result.start[j]), job


@SETTINGS
@given(scenarios())
def test_never_preempt_work_is_never_preempted(scenario):
    rules, jobs = scenario
    result = replay(jobs, [(0.0, rules)])
    never = {quota.project for quota in rules.quotas if quota.preemption_class == "never"}
    for j, job in enumerate(jobs):
        if job.project in never:
            assert result.preemptions[j] == 0
    for victim, _, _, _ in result.preempted_by:
        assert jobs[victim].project not in never


def reclaim_past_a_never_preempt_lower_tier() -> tuple[Rules, list[Job]]:
    """Found by the grace property (8,000 examples), cut down: a's high job may preempt low
    work, but the only low job is b's never-preempt one; c borrows a's idle guarantee. The
    tier preemption finds no victim, ever; the reclaim must still take the guarantee back
    after a's grace (the engine once let the first's "none, ever" stop the second)."""
    quotas = (
        QuotaRule("a", F, 1, reclaim_grace=5 * MIN, preemption_class="allowed"),
        QuotaRule("b", F, 4, lending_limit=0, preemption_class="never"),
        QuotaRule("c", F, 0, preemption_class="allowed"),
        QuotaRule("d", F, 0, preemption_class="allowed"),
    )
    rules = Rules(
        capacity={F: 5.0},
        tiers=(
            TierRule("high", 90, may_preempt=True, preemptible=frozenset({"low"})),
            TierRule("mid", 50),
            TierRule("low", 10),
        ),
        classes=CLASSES,
        quotas=quotas,
        project_tiers={project: "high" for project in PROJECTS},
        default_tier="low",
        default_class="allowed",
    )
    jobs = [
        Job("j0", 0.0, 4, F, 60 * MIN, "b", "low", "u0"),
        Job("j1", 0.0, 1, F, 120 * MIN, "c", "mid", "u0"),
        Job("j2", 10 * MIN, 1, F, 10 * MIN, "a", "high", "u0"),
    ]
    return rules, jobs


@SETTINGS
@given(scenarios(classes=("allowed", "never")))
@example(reclaim_past_a_never_preempt_lower_tier())
def test_a_guarantee_is_given_back_within_its_grace(scenario):
    rules, jobs = scenario
    result = replay(jobs, [(0.0, rules)])
    quotas = {quota.project: quota for quota in rules.quotas}
    entitled_since: dict[int, float] = {}
    # Nothing this looks at changes between these moments (arrivals, starts, ends and the
    # moments a reason was said), so an entitlement seen at one lasts until the next.
    times = set(moments(result)) | {since for _, since, _ in result.reasons}
    for t in sorted(times):
        used = usage(result, t)
        pending = pending_at(result, t)
        # A project is one queue ordered by tier: its head is the earliest job of its highest
        # waiting tier.
        heads: dict[str, int] = {}
        for j in sorted(
            pending, key=lambda j: (-rules.tier(result.tiers[j]).score, jobs[j].arrival, j)
        ):
            heads.setdefault(jobs[j].project, j)
        now = set()
        for j in heads.values():
            job = jobs[j]
            quota = quotas[job.project]
            if held_by_quota(result, j, t):
                continue  # held by a cap, not by borrowers
            others_borrow = any(
                u > quotas[p].guarantee + EPS for p, u in used.items() if p != job.project
            )
            if others_borrow and used.get(job.project, 0.0) + job.gpus <= quota.guarantee + EPS:
                now.add(j)
                since = entitled_since.setdefault(j, t)
                assert t - since <= quota.reclaim_grace + EPS, (job, since, t)
        for j in list(entitled_since):
            if j not in now:
                # Entitled until now (started, or no longer entitled): a wait past the grace
                # between two moments is as wrong as one still seen at a moment.
                since = entitled_since.pop(j)
                assert t - since <= quotas[jobs[j].project].reclaim_grace + EPS, (jobs[j], since, t)


def score_at(rules: Rules, j: int, result: Result, t: float) -> int:
    tier = rules.tier(result.tiers[j])
    if not tier.aging_after:
        return tier.score
    score = tier.score + int((t - result.jobs[j].arrival) / tier.aging_after) * tier.aging_step
    return min(score, tier.aging_cap) if tier.aging_cap is not None else score


@SETTINGS
@given(scenarios())
def test_a_higher_tier_never_waits_behind_a_lower_one_unless_a_rule_explains_it(scenario):
    rules, jobs = scenario
    result = replay(jobs, [(0.0, rules)])
    quotas = {quota.project: quota for quota in rules.quotas}
    for low, low_start, _ in result.runs:
        before = {p: u for p, u in usage(result, low_start - 1e-3).items()}
        # Ended at that instant: their GPUs were free again.
        for j, start, end in result.runs:
            if end == low_start and start < low_start:
                project = jobs[j].project
                before[project] = before.get(project, 0.0)
        ended = {j for j, _, end in result.runs if end == low_start}
        for high in pending_at(result, low_start):
            if high == low or high in running_at(result, low_start):
                continue
            if rules.tier(result.tiers[high]).score <= rules.tier(result.tiers[low]).score:
                continue
            if jobs[high].arrival > low_start:
                continue
            if held_by_quota(result, high, low_start):
                continue  # held by a limit
            if any(
                k != high
                and jobs[k].project == jobs[high].project
                and result.tiers[k] == result.tiers[high]
                and (jobs[k].arrival, k) < (jobs[high].arrival, high)
                for k in pending_at(result, low_start)
            ):
                continue  # behind an earlier job of its own project and tier
            low_used = sum(
                jobs[j].gpus
                for j in running_at(result, low_start - 1e-3)
                if jobs[j].project == jobs[low].project and j not in ended
            )
            if (
                jobs[low].project != jobs[high].project
                and low_used + jobs[low].gpus <= quotas[jobs[low].project].guarantee + EPS
            ):
                continue  # the lower job ran within its project's guarantee (another project)
            if score_at(rules, low, result, low_start) >= score_at(rules, high, result, low_start):
                continue  # aging raised it
            raise AssertionError(
                f"{jobs[high]} (tier {result.tiers[high]}) waited while {jobs[low]} "
                f"(tier {result.tiers[low]}) started at {low_start}"
            )


@SETTINGS
@given(scenarios(over_the_pool=True))
def test_every_replay_ends_even_when_the_guarantees_exceed_the_pool(scenario):
    """The engine ends on any rules: with guarantees above the pool a tier's preemption and
    a guarantee's reclaim could take the same job from each other forever in one instant
    (found by random replays that never ended); no job loses its GPUs twice in one instant.
    (The Kueue model shares the rule, but on such rules its fair sharing can preempt about
    once a second for as long as the jobs run: tens of thousands of preemptions, too slow
    for every random example; an open question of issue 38.)"""
    rules, jobs = scenario
    with finishes_within(60):
        result = replay(jobs, [(0.0, rules)], model=SchedulerModel("strict"))
    losses = [(victim, at) for victim, _by, at, _why in result.preempted_by]
    assert len(losses) == len(set(losses))
