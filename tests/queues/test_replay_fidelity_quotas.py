"""The Kueue model's guarantees and lending limits against the lab's Kueue 0.17, by hand.

The two scenarios of ``test_replay_kueue_model.py`` (a head the lending limits hold, and
never-preempt work over its guarantee) run on the real Kueue (``deploy/k8s/up.sh``; the
driver ``bench/fidelity_kueue.py`` makes the ClusterQueues from the same ``Scenario`` as the
replay's rules): four A100s, the owner guaranteed 3, the borrower 1; the borrower's head asks
for 2 GPUs, its next Job for 1. Kueue finds no fit for the head (it would borrow a GPU the
owner's ``lendingLimit: 0`` holds, or its ``borrowingLimit: 0`` forbids borrowing at all),
leaves it pending, and admits the next Job of the same ClusterQueue; after that Job ended the
head is still pending. The model starts the same Job at the same time (within the lab's
timing: Kueue stamps its admissions in whole seconds) and never the head. The control: the
owner lends, and the head borrows its GPU at once, in both.

And Kueue's fair-sharing preemption: with fair sharing on and ``reclaimWithinCohort: Any``,
Kueue preempts another ClusterQueue's borrower when the preemptor's queue would hold a lower
share than the victim's did, whatever the priorities; the model does the same
(``queues.replay.kueue_fair``).
"""

import math

import pytest

from bench.fidelity_kueue import KueueLab, kueue_inputs, kueue_rules, kueue_settings
from bench.fidelity_slurm import Ran
from bench.kueue_scenarios import Project, Scenario
from queues.replay import replay
from queues.replay.mixes import LabJob
from queues.replay.scheduler_model import SchedulerModel
from tests.queues.conftest import kube_env

LENDING_HELD = Scenario(
    "lending-held",
    (
        Project("owner", "regular", guarantee=3, lending_limit=0),
        Project("borrower", "regular", guarantee=1),
    ),
)
NEVER_PREEMPT = Scenario(
    "never-preempt-over",
    (
        Project("owner", "regular", guarantee=3),
        Project("borrower", "regular", guarantee=1, never_preempt=True),
    ),
)
LENDS = Scenario(
    "lends",
    (Project("owner", "regular", guarantee=3), Project("borrower", "regular", guarantee=1)),
)
FAIR = Scenario(
    "fair-sharing",
    (Project("p-key", "key", guarantee=1), Project("p-regular", "regular", guarantee=1)),
)
FAIR_JOBS = [
    LabJob(0.0, 3, 12, "key", "a100", in_project="p-key"),  # borrows 2 of the cohort's 2
    LabJob(2.0, 2, 6, "regular", "a100", in_project="p-regular"),  # would borrow 1
]
JOBS = [
    LabJob(0.0, 2, 8, "regular", "a100", in_project="borrower"),  # the head: 1 GPU to borrow
    LabJob(1.0, 1, 8, "regular", "a100", in_project="borrower"),  # the next: its guarantee
]
WATCH = 14.0  # seconds: the next Job's run ends (~9 s) and Kueue requeues the head meanwhile
# Seconds: the admission's whole-second stamp, the driver's 0.2 s polling and a loaded CI
# machine's latency (each case tells "at once" from waiting a run of 6-8 s, or forever).
TOLERANCE = 4.0


def _run(
    scenario: Scenario, workload: list[LabJob] = JOBS, watch: float = WATCH
) -> tuple[list[Ran], list[float], list[dict]]:
    env = kube_env()
    lab = KueueLab(env["KUBE_API_SERVER"], env["KUBE_CA_FILE"], env["KUBE_TOKEN_FILE"])
    lab.setup(scenario)
    try:
        ran = lab.submit(workload, timeout=watch)
        head = lab.conditions(workload[0].project, ran[0].slurm_id)
    finally:
        lab.teardown()
    jobs = kueue_inputs(ran)
    timeline = [(min(job.arrival for job in jobs), kueue_rules(scenario))]
    model = SchedulerModel("kueue", priorities=scenario.priorities, kueue=kueue_settings(scenario))
    modelled = replay(jobs, timeline, model=model)
    for r, start in zip(ran, modelled.start, strict=True):
        print(f"{r.slurm_id}: Kueue {r.start - r.submit:+.1f} s, model {start - r.submit:+.1f} s")
    for cond in head:
        print(f"head {cond['type']}={cond['status']} {cond.get('reason')}: {cond.get('message')}")
    return ran, modelled.start, head


@pytest.mark.k8s
@pytest.mark.parametrize("scenario", [LENDING_HELD, NEVER_PREEMPT], ids=lambda s: s.name)
def test_kueue_passes_over_a_head_that_cannot_borrow_and_the_model_agrees(kube_server, scenario):
    ran, starts, head = _run(scenario)
    held, following = ran
    # Kueue: the head never admitted, its quota never reserved, after the next Job's end.
    assert math.isnan(held.start)
    assert [c["status"] for c in head if c["type"] == "QuotaReserved"] == ["False"]
    # ... while the next Job of the same ClusterQueue was admitted at once, and ran.
    assert following.start - following.submit < TOLERANCE
    assert not math.isnan(following.end)
    # The model: the head set aside (never started), the next Job started as Kueue did.
    assert math.isnan(starts[0])
    assert abs(starts[1] - following.start) <= TOLERANCE


@pytest.mark.k8s
def test_when_the_owner_lends_the_head_borrows_at_once_on_kueue_and_in_the_model(kube_server):
    ran, starts, _head = _run(LENDS)
    for r, start in zip(ran, starts, strict=True):
        assert r.start - r.submit < TOLERANCE
        assert abs(start - r.start) <= TOLERANCE


@pytest.mark.k8s
def test_kueue_preempts_a_higher_priority_borrower_by_fair_sharing(kube_server):
    ran, starts, _head = _run(FAIR, FAIR_JOBS, watch=40.0)
    key, regular = ran
    # Kueue: the regular Job (priority 400, borrowing 1) is admitted at once by preempting
    # the key Job (700, borrowing 2), which runs its whole run again after the regular one.
    assert regular.start - regular.submit < TOLERANCE
    assert key.preempted >= 1
    assert not math.isnan(key.end)
    # The model (``queues.replay.kueue_fair``): the same preemption, the regular Job admitted
    # at the same time as on Kueue (without it the Job waited for the key Job's end).
    assert abs(starts[0] - key.start) <= TOLERANCE
    assert abs(starts[1] - regular.start) <= TOLERANCE
