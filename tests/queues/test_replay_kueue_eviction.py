"""A preemptor is admitted only once its targets' eviction ended (``eviction_delay``).

Kueue 0.17 (``pkg/scheduler/scheduler.go``) issues the targets' eviction and requeues the
preemptor (``PendingPreemption``: its ClusterQueue's sticky head); the targets keep their
quota until their Job is suspended, and the preemptor is admitted in a later cycle. With
``KueueSettings.eviction_delay`` the model holds the targets' GPUs for the preemptor (no
other head takes them) and starts its run that many seconds after the preemption.
"""

from queues.replay import Job, QuotaRule, Rules, TierRule, replay
from queues.replay.kueue_fair import KueueSettings
from queues.replay.scheduler_model import SchedulerModel

F = "lab/a100"


def _rules() -> Rules:
    # Four GPUs, each queue guaranteed 2.
    return Rules(
        capacity={F: 4.0},
        tiers=(TierRule("key", 70), TierRule("exploratory", 10)),
        classes=(),
        quotas=(QuotaRule("a", F, 2.0), QuotaRule("b", F, 2.0)),
        project_tiers={"a": "key", "b": "key"},
    )


def _jobs() -> list[Job]:
    return [
        # B borrows 2 GPUs from t=0.
        Job("b-borrower", 0, 4, F, 100, project="b", tier="exploratory"),
        # At t=10 A reclaims its guarantee: B's borrower is preempted.
        Job("a-reclaim", 10, 2, F, 20, project="a", tier="key"),
    ]


def test_the_preemptor_starts_after_the_eviction_delay():
    model = SchedulerModel("kueue", kueue=KueueSettings(eviction_delay=0.5))
    result = replay(_jobs(), [(0.0, _rules())], model=model)
    names = [job.name for job in result.jobs]
    events = [(names[v], names[by], at) for v, by, at, _why in result.preempted_by]
    assert events == [("b-borrower", "a-reclaim", 10)]
    assert result.start[1] == 10.5  # admitted once the borrower's eviction ended
    assert result.end[1] == 30.5


def test_no_delay_by_default_starts_it_in_the_instant():
    result = replay(_jobs(), [(0.0, _rules())], model=SchedulerModel("kueue"))
    assert result.start[1] == 10
    assert result.end[1] == 30
