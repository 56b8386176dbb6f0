"""Kueue 0.17's fair-sharing preemption in the Kueue replay model (``queues.replay.kueue_fair``),
by hand: a borrower is preempted for a queue whose share stays at or below the borrower's,
never when the preemptor would end above it, never a queue within its nominal quota nor a
never-preempt one, and the queue with the highest share gives first. Each fails on the model
without fair sharing (``KueueSettings(fair_sharing=False)``, the model before it)."""

from queues.replay import ClassRule, Job, QuotaRule, Rules, TierRule, replay
from queues.replay.engine import Result
from queues.replay.kueue_cohort import ANY, NEVER, KueueSettings
from queues.replay.scheduler_model import SchedulerModel

F = "lab/a100"
TIERS = (TierRule("key", 70), TierRule("regular", 40), TierRule("exploratory", 10))
PROJECTS = {"p-key": "key", "p-regular": "regular", "p-exploratory": "exploratory"}
FAIR = SchedulerModel("kueue", kueue=KueueSettings(reclaim=dict.fromkeys(PROJECTS, ANY)))
CLASSIC = SchedulerModel("kueue", kueue=KueueSettings(fair_sharing=False))


def _rules(guarantees: dict[str, float], capacity: float = 4.0, never: str = "") -> Rules:
    return Rules(
        capacity={F: capacity},
        tiers=TIERS,
        classes=(ClassRule("never", "forbidden"),),
        quotas=tuple(
            QuotaRule(
                project,
                F,
                guarantees.get(project, 0.0),
                preemption_class="never" if project == never else "",
            )
            for project in PROJECTS
        ),
        project_tiers=PROJECTS,
    )


def _job(name: str, at: float, gpus: float, run: float, project: str) -> Job:
    return Job(name, at, gpus, F, run, project=project)


def _run(jobs: list[Job], rules: Rules, model: SchedulerModel = FAIR) -> Result:
    return replay(jobs, [(0.0, rules)], model=model)


def _victims(result: Result) -> list[str]:
    return [result.jobs[v].name for v, _by, _t, _why in result.preempted_by]


def test_a_higher_priority_borrower_is_preempted_for_a_queue_under_its_share():
    # Nothing guaranteed: key borrows 4 (share 1000), regular's 1 GPU would make it 250 ≤
    # key's 750 after losing one job: the key job goes, whatever its priority.
    rules = _rules({})
    jobs = [
        _job("key-1", 0, 2, 100, "p-key"),
        _job("key-2", 1, 2, 100, "p-key"),
        _job("regular", 5, 1, 10, "p-regular"),
    ]
    result = _run(jobs, rules)
    assert result.start[2] == 5
    assert _victims(result) == ["key-2"]  # the most recently admitted (same priority, later)
    assert _run(jobs, rules, CLASSIC).start[2] == 101  # the requeue a second after the end


def test_no_preemption_when_the_preemptor_would_end_above_the_target():
    # Regular already borrows 2; with 2 more its share (4 of 6 lendable: 667) would be above
    # key's after the removal (333) and not below key's before it (667): it waits.
    rules = _rules({}, capacity=6.0)
    jobs = [
        _job("key-1", 0, 2, 100, "p-key"),
        _job("key-2", 0, 2, 100, "p-key"),
        _job("regular-1", 0, 2, 100, "p-regular"),
        _job("regular-2", 5, 2, 10, "p-regular"),
    ]
    result = _run(jobs, rules)
    assert result.preempted_by == []
    assert result.start[3] == 101  # the requeue a second after the end


def test_a_queue_within_its_nominal_quota_is_never_a_victim():
    # Key holds its 2 guaranteed GPUs and borrows nothing; exploratory (no guarantee) borrows
    # the other 2. Regular's job preempts exploratory's, never key's.
    rules = _rules({"p-key": 2.0, "p-regular": 1.0}, capacity=4.0)
    jobs = [
        _job("key", 0, 2, 100, "p-key"),
        _job("exploratory", 0, 2, 100, "p-exploratory"),
        _job("regular", 5, 2, 10, "p-regular"),
    ]
    result = _run(jobs, rules)
    assert _victims(result) == ["exploratory"]
    assert result.start[2] == 5
    # Without fair sharing regular's request above its guarantee never reclaims.
    assert _run(jobs, rules, CLASSIC).preempted_by == []


def test_never_preempt_work_is_never_a_victim():
    # Exploratory's work may never be preempted: it never borrows, so it keeps its GPUs.
    rules = _rules({"p-exploratory": 2.0}, capacity=4.0, never="p-exploratory")
    jobs = [
        _job("exploratory", 0, 2, 100, "p-exploratory"),
        _job("key", 0, 2, 100, "p-key"),
        _job("regular", 5, 1, 10, "p-regular"),
    ]
    result = _run(jobs, rules)
    assert "exploratory" not in _victims(result)
    # Key borrows 2 (share 2 of 4 lendable: 500); regular's 1 GPU gives it 250, below key's
    # before the removal (the second strategy; not ≤ key's 0 after it): key's job goes.
    assert _victims(result) == ["key"]
    assert _run(jobs, rules, CLASSIC).preempted_by == []


def test_the_queue_with_the_highest_share_gives_first():
    # Key borrows 1, exploratory 3: regular's job takes exploratory's, though it has the
    # lowest priority and key's job was admitted last.
    rules = _rules({})
    jobs = [
        _job("exploratory", 0, 3, 100, "p-exploratory"),
        _job("key", 1, 1, 100, "p-key"),
        _job("regular", 5, 1, 10, "p-regular"),
    ]
    result = _run(jobs, rules)
    assert _victims(result) == ["exploratory"]
    assert _run(jobs, rules, CLASSIC).preempted_by == []


def test_a_queue_that_reclaims_never_preempts_nothing_while_borrowing():
    # The lab's first scenario: reclaimWithinCohort Never (no guarantees, as the export
    # writes it): no preemption, as without fair sharing.
    rules = _rules({})
    jobs = [
        _job("key-1", 0, 2, 100, "p-key"),
        _job("key-2", 0, 2, 100, "p-key"),
        _job("regular", 5, 1, 10, "p-regular"),
    ]
    result = _run(jobs, rules, SchedulerModel("kueue"))
    assert result.preempted_by == []
    assert result.start[2] == 101  # the requeue a second after the end
    never = SchedulerModel("kueue", kueue=KueueSettings(reclaim=dict.fromkeys(PROJECTS, NEVER)))
    assert _run(jobs, rules, never).preempted_by == []
