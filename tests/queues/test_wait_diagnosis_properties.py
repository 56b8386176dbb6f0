"""Property: for any queue state, the diagnosis's category and its figures agree.

Hypothesis generates queue states (GPUs running per project, tier, user, flavor and pool;
other pending jobs with their reasons; the projects' maxima, the tiers' caps, the pools'
capacity) and a pending job with a scheduler reason, classified by the real classifier. For
every answer, the figures are recomputed independently from the state and must make the
answer true; an answer the figures do not support must be "unknown" with the raw reason; and
the next step states those figures."""

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from queues.models import JobState, WaitCategory, WorkloadJob
from queues.schedulers.classify import classify_slurm
from queues.selectors import diagnosis as d
from queues.selectors.workload import gpus_text, next_step

PROJECTS, TIERS, FLAVORS, POOLS, USERS = [1, 2, 3], [1, 2, 3], [1, 2], [1, 2], ["ana", "bo"]
REASONS = [
    "Resources",
    "Priority",
    "AssocGrpGRES",
    "QOSGrpGRES",
    "QOSMaxGRESPerUser",
    "QOSMaxGRESPerJob",
    "AssocMaxJobsLimit",
    "Dependency",
    "DependencyNeverSatisfied",
    "BeginTime",
    "JobHeldUser",
    "BadConstraints",
    "ReqNodeNotAvail",
    "SomethingNew",
]
T0 = datetime(2026, 11, 1, tzinfo=UTC)
gpus = st.sampled_from([0.5, 1, 2, 4, 8, 16, 32])
maybe = st.one_of(st.none(), st.integers(min_value=1, max_value=48))

running = st.builds(
    d.Running,
    project=st.sampled_from(PROJECTS),
    tier=st.sampled_from(TIERS),
    user=st.sampled_from(USERS),
    flavor=st.sampled_from(FLAVORS),
    pool=st.sampled_from(POOLS),
    gpus=gpus,
)
waiting = st.builds(
    d.Waiting,
    job_id=st.integers(min_value=100, max_value=999).map(str),
    project=st.sampled_from(PROJECTS),
    tier=st.sampled_from(TIERS),
    tier_score=st.just(0),  # set from the tier below
    flavor=st.sampled_from(FLAVORS),
    pool=st.sampled_from(POOLS),
    gpus=gpus,
    submitted=st.integers(min_value=0, max_value=100).map(lambda m: T0 + timedelta(minutes=m)),
    reason=st.sampled_from(REASONS),
)


@st.composite
def queue(draw):
    tiers = {
        pk: d.TierRule(score=pk * 10, max_total=draw(maybe), max_per_job=draw(maybe))
        for pk in TIERS
    }
    others = [
        d.Waiting(**{**w.__dict__, "tier_score": tiers[w.tier].score})
        for w in draw(st.lists(waiting, max_size=30, unique_by=lambda w: w.job_id))
    ]
    quotas = {
        key: draw(st.one_of(st.none(), st.integers(min_value=0, max_value=48)))
        for key in draw(
            st.sets(
                st.tuples(
                    st.sampled_from(PROJECTS), st.sampled_from(POOLS), st.sampled_from(FLAVORS)
                ),
                max_size=8,
            )
        )
    }
    capacity = {
        key: draw(st.integers(min_value=0, max_value=64))
        for key in draw(
            st.sets(st.tuples(st.sampled_from(POOLS), st.sampled_from(FLAVORS)), max_size=4)
        )
    }
    state = d.QueueState(
        running=draw(st.lists(running, max_size=25)),
        waiting=others,
        quotas=quotas,
        tiers=tiers,
        capacity=capacity,
    )
    reason = draw(st.sampled_from(REASONS))
    job = d.Asked(
        job_id="1",
        project=draw(st.sampled_from(PROJECTS)),
        tier=draw(st.sampled_from(TIERS)),
        user=draw(st.sampled_from(USERS)),
        flavor=draw(st.sampled_from(FLAVORS)),
        pool=draw(st.sampled_from(POOLS)),
        gpus=draw(gpus),
        submitted=T0 + timedelta(minutes=draw(st.integers(min_value=0, max_value=100))),
        reason=reason,
        category=classify_slurm(reason).category,
        constraints=draw(st.sampled_from(["", "nvlink"])),
    )
    return state, job


def total(rows):
    return float(sum(row.gpus for row in rows))


def can_ever_start(state, waiting) -> bool:
    """A job above its tier's per-job cap never starts, so it is ahead of no one."""
    cap = state.tiers[waiting.tier].max_per_job
    return cap is None or waiting.gpus <= cap


def expected_ahead(state, job):
    score = state.tiers[job.tier].score
    return {
        w.job_id
        for w in state.waiting
        if w.flavor == job.flavor
        and w.pool == job.pool
        and w.reason in ("Priority", "Resources")
        and can_ever_start(state, w)
        and (
            w.tier_score > score
            or (w.tier_score == score and (w.submitted, w.job_id) < (job.submitted, job.job_id))
        )
    }


@settings(max_examples=400, deadline=None)
@given(queue())
def test_every_answer_agrees_with_its_figures(case):
    state, job = case
    found = d.diagnose(state, job)
    tier = state.tiers[job.tier]
    fig = found.figures
    if not found.known:
        assert found.why_unknown and found.reason == job.reason
        assert found.limit == "" and not found.ahead
    else:
        assert found.category == job.category  # only ever confirmed, never changed
    if found.limit == d.Limit.PROJECT_QUOTA:
        used = total(
            r
            for r in state.running
            if (r.project, r.pool, r.flavor) == (job.project, job.pool, job.flavor)
        )
        key = (job.project, job.pool, job.flavor)
        limit = state.quotas.get(key, 0)
        if key in state.quotas and limit is None:
            limit = state.capacity.get((job.pool, job.flavor), 0)
        assert fig == {"used": used, "limit": limit, "asked": job.gpus}
        assert limit == 0 or used + job.gpus > limit
        assert found.can_never_start == (job.gpus > limit)
    elif found.limit == d.Limit.TIER_CAP:
        used = total(r for r in state.running if r.tier == job.tier)
        assert fig == {"used": used, "limit": tier.max_total, "asked": job.gpus}
        assert used + job.gpus > tier.max_total
        assert sum(found.holders.values()) == used
    elif found.limit == d.Limit.USER_CAP:
        used = total(r for r in state.running if r.tier == job.tier and r.user == job.user)
        assert fig == {"used": used, "asked": job.gpus}  # a limit set by hand: no value
        assert found.clears_by_itself is None
    elif found.limit == d.Limit.PER_JOB:
        assert job.gpus > fig["limit"] == tier.max_per_job and found.can_never_start
    elif found.limit == d.Limit.POOL_CAPACITY:
        capacity = state.capacity[(job.pool, job.flavor)]
        run = total(r for r in state.running if (r.pool, r.flavor) == (job.pool, job.flavor))
        assert fig == {
            "capacity": capacity,
            "running": run,
            "free": max(0.0, capacity - run),
            "asked": job.gpus,
        }
        assert fig["free"] < job.gpus
    elif found.limit == d.Limit.JOBS_AHEAD:
        ahead = expected_ahead(state, job)
        assert found.ahead_count == len(ahead) == fig["ahead"] > 0
        assert {w.job_id for w in found.ahead} <= ahead
        assert len(found.ahead) == min(len(ahead), d.AHEAD_SHOWN)
    elif job.reason == "Priority":
        assert not found.known and not expected_ahead(state, job)
    if job.category == WaitCategory.RESOURCE and not found.known:
        capacity = state.capacity.get((job.pool, job.flavor))
        run = total(r for r in state.running if (r.pool, r.flavor) == (job.pool, job.flavor))
        assert capacity is None or capacity - run >= job.gpus

    # The next step states the figures it rests on.
    pending = WorkloadJob(job_id="1", state=JobState.PENDING, gpus=int(job.gpus), reason=job.reason)
    text, url, _label = next_step(pending, found, tier_name="Key")
    quota_like = (d.Limit.PROJECT_QUOTA, d.Limit.TIER_CAP, d.Limit.USER_CAP)
    if found.limit in quota_like and not found.can_never_start:
        for name in fig:  # used, limit (unknown for a per-user limit set by hand), asked
            assert gpus_text(fig[name]) in text
    if found.limit == d.Limit.POOL_CAPACITY and not found.can_never_start:
        for name in ("capacity", "running", "free", "asked"):
            assert gpus_text(fig[name]) in text
    if found.limit == d.Limit.JOBS_AHEAD:
        assert gpus_text(fig["ahead"]) in text
    if not found.known:
        assert f"“{job.reason}”" in text
    # A quota exception is offered only where the project's quota holds the job.
    assert ("quota_exception" in url) == (found.limit == d.Limit.PROJECT_QUOTA)
