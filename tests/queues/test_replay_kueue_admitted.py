"""A workload admitted through preemption is no target in the instant it preempted.

Kueue 0.17 (``pkg/scheduler/scheduler.go``) does not admit a preemptor in the cycle that
found its targets: it issues their eviction and requeues the preemptor (``PendingPreemption``:
its queue's sticky head), which is admitted only in a later cycle, once the evictions ended
and gave the quota back. Until then it holds no quota and is no candidate for another head's
preemption. The model starts the preemptor in the instant its targets lose their GPUs (its
cycles take milliseconds, one instant here), so it keeps it out of every look for targets in
that instant: without that, the next head of the victim's queue could take it back at once,
and on rules where a queue preempts its own lower priorities, that ran as a loop a queue's
reclaim could not stop (the lab's busy scenario, seed 2: 133 preemptions in the model, 29 on
Kueue; now 38).
"""

from queues.replay import Job, QuotaRule, Rules, TierRule, replay
from queues.replay.scheduler_model import SchedulerModel

F = "lab/a100"
KUEUE = SchedulerModel("kueue")


def _rules() -> Rules:
    # Four GPUs, each queue guaranteed 2; A's fair-sharing weight 2, B's 1.
    return Rules(
        capacity={F: 4.0},
        tiers=(TierRule("key", 70), TierRule("regular", 40), TierRule("exploratory", 10)),
        classes=(),
        quotas=(
            QuotaRule("a", F, 2.0, fair_share_weight=2.0),
            QuotaRule("b", F, 2.0),
        ),
        project_tiers={"a": "key", "b": "key"},
    )


def _jobs() -> list[Job]:
    return [
        # B borrows 2 GPUs from t=0.
        Job("b-borrower", 0, 4, F, 100, project="b", tier="exploratory"),
        # At t=10: A's job would borrow 2 (share 2/2 = 1 < B's 2): it preempts B's borrower.
        Job("a-big", 10, 4, F, 100, project="a", tier="key"),
        # B's head of that cycle finds no target (its share would equal A's) and is set aside;
        Job("b-head", 10, 3, F, 100, project="b", tier="key"),
        # B's next head is within B's nominal quota: it may take any borrower, A's job too
        # (FairSharingPreemptWithinNominal), but not in the instant A's job preempted.
        Job("b-within", 10, 2, F, 100, project="b", tier="regular"),
    ]


def test_a_preemptor_is_no_target_in_the_instant_it_preempted():
    result = replay(_jobs(), [(0.0, _rules())], model=KUEUE)
    names = [job.name for job in result.jobs]
    events = [(names[v], names[by], at) for v, by, at, _why in result.preempted_by]
    assert events[0] == ("b-borrower", "a-big", 10)
    assert result.start[1] == 10
    # A's job is not preempted at 10 (before: by B's within-nominal head at 10, the instant it
    # started); B's head takes it back at the requeue, a second after the preemption, when on
    # Kueue A's job is admitted.
    assert ("a-big", "b-within", 10) not in events
    assert ("a-big", "b-within", 11) in events
    assert result.start[3] == 11
