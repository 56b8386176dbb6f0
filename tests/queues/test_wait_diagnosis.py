"""Why is my job waiting: each answer names the limit and the figures that make it true, read
from the job's own source; where the figures support no reason the answer is "unknown" with
the raw reason. One test per contradiction an answer used to make."""

from datetime import timedelta

import pytest
from django.utils import timezone

from governance import services as rules
from queues.models import Cluster, EventKind, JobState, WorkloadJob
from queues.selectors import job_wait_explanation
from queues.selectors.workload import project_flavor_use
from queues.services.workload import JobEvent, events_ingest
from tests.conftest import REASON

NOW = timezone.now().replace(microsecond=0)


@pytest.fixture
def lab(world):
    cluster = Cluster.objects.create(name="hpc", slurm_cluster="hpc")
    cluster.pools.set([world.training])  # 64 A100, 32 H100 declared
    world.cluster = cluster
    return world


def job(world, job_id, reason, *, gpus=4, minutes=30, running=False, source="hpc", **keys):
    keys = {
        "project": world.vision,
        "tier": world.key,
        "flavor": world.a100,
        **keys,
    }
    cluster = world.cluster if source == "hpc" else None
    events = [
        JobEvent(
            source=source,
            event_id=f"{job_id}:submit",
            job_id=job_id,
            time=NOW - timedelta(minutes=minutes),
            kind=EventKind.SUBMITTED,
            cluster=cluster,
            gpus=gpus,
            **keys,
        )
    ]
    if running:
        events.append(
            JobEvent(
                source=source,
                event_id=f"{job_id}:start",
                job_id=job_id,
                time=NOW - timedelta(minutes=minutes - 1),
                kind=EventKind.STARTED,
            )
        )
    else:
        events.append(
            JobEvent(
                source=source,
                event_id=f"{job_id}:pending",
                job_id=job_id,
                time=NOW - timedelta(minutes=minutes - 1),
                kind=EventKind.PENDING,
                reason=reason,
            )
        )
    events_ingest(events=events)
    return WorkloadJob.objects.get(source=source, job_id=job_id)


def explain(pending):
    return job_wait_explanation(
        WorkloadJob.objects.select_related("project", "tier", "flavor").get(pk=pending.pk),
        now=NOW,
    )


def test_a_quota_answer_with_nothing_running_is_unknown(lab):
    # Vision may run 40 A100 in training and runs none: "uses 0 of 40, wait for its jobs"
    # would contradict itself.
    answer = explain(job(lab, "1", "AssocGrpGRES", gpus=8))
    assert answer.category == "unknown" and answer.action_url == ""
    assert answer.figures == {"used": "0", "limit": "40", "asked": "8"}
    assert "“AssocGrpGRES”" in answer.next_step


def test_a_true_quota_answer_shows_used_limit_and_who_uses_it(lab):
    job(lab, "r1", "", gpus=36, running=True)
    answer = explain(job(lab, "1", "AssocGrpGRES", gpus=8))
    assert answer.category == "quota" and answer.limit == "project_quota"
    assert answer.figures == {"used": "36", "limit": "40", "asked": "8"}
    assert "uses 36 of 40 A100 80G GPUs" in answer.next_step
    assert "4 of them are released" in answer.next_step  # 36 + 8 − 40
    assert answer.holders == [{"project": "Vision", "gpus": "36"}]
    assert "quota_exception" in answer.action_url


def test_qos_grp_gres_is_the_tiers_cap_across_projects_not_the_projects_quota(lab):
    rules.tier_update(tier=lab.key, user=lab.ops, reason=REASON, data={"max_gpus_total": 12})
    job(lab, "r1", "", gpus=6, running=True)
    job(lab, "r2", "", gpus=4, running=True, project=lab.speech)
    answer = explain(job(lab, "1", "QOSGrpGRES", gpus=4))
    assert answer.category == "quota" and answer.limit == "tier_cap"
    assert answer.figures == {"used": "10", "limit": "12", "asked": "4"}
    assert {row["project"] for row in answer.holders} == {"Vision", "Speech"}
    assert "across all projects" in answer.next_step and answer.action_url == ""


def test_resource_shortage_while_nothing_runs_is_unknown(lab):
    answer = explain(job(lab, "1", "Resources", gpus=8))
    assert answer.category == "unknown"
    assert answer.figures == {"capacity": "64", "running": "0", "free": "64", "asked": "8"}


def test_free_gpus_count_only_the_jobs_own_source(lab):
    # 60 A100 run on the cluster; a trace's jobs of the same project do not use its GPUs.
    job(lab, "r1", "", gpus=30, running=True)
    job(lab, "r2", "", gpus=30, running=True, project=lab.speech)
    job(lab, "t1", "", gpus=64, running=True, source="trace:philly")
    answer = explain(job(lab, "1", "Resources", gpus=8))
    assert answer.category == "resource" and answer.limit == "pool_capacity"
    assert answer.figures == {"capacity": "64", "running": "60", "free": "4", "asked": "8"}
    assert "4 are free" in answer.next_step


def test_the_projects_pending_gpus_count_only_the_jobs_own_source(lab):
    job(lab, "1", "Priority", gpus=2)
    for n in range(5):
        job(lab, f"t{n}", "Priority", gpus=4, source="trace:philly")
    [a100] = project_flavor_use(lab.vision, at=NOW, source="hpc")
    assert a100.pending == 2


def test_no_quota_of_the_flavor_means_the_job_can_never_start(lab):
    # Vision has no H100 quota: Slurm's typed limit is 0, not "no limit".
    answer = explain(job(lab, "1", "AssocGrpGRES", gpus=1, flavor=lab.h100))
    assert answer.category == "quota" and answer.clears_by_itself is False
    assert answer.figures["limit"] == "0" and "never start" in answer.next_step


def test_jobs_ahead_compete_for_the_same_flavor_and_pool_could_start_and_are_all_counted(lab):
    mine = job(lab, "1", "Priority", gpus=1, tier=lab.regular, minutes=10)
    for n in range(25):  # 25 of a higher tier, on the same GPUs: all ahead
        job(lab, f"h{n}", "Priority", gpus=1, tier=lab.production, minutes=20)
    job(lab, "same-earlier", "Resources", gpus=1, tier=lab.regular, minutes=15)
    job(lab, "same-later", "Priority", gpus=1, tier=lab.regular, minutes=5)
    job(lab, "other-flavor", "Priority", gpus=1, tier=lab.production, flavor=lab.h100)
    job(lab, "dependency", "Dependency", gpus=1, tier=lab.production)
    job(lab, "begin", "BeginTime", gpus=1, tier=lab.production)
    job(lab, "held", "JobHeldUser", gpus=1, tier=lab.production)
    job(lab, "capped", "AssocGrpGRES", gpus=1, tier=lab.production)
    answer = explain(mine)
    assert answer.category == "queue_rule" and answer.limit == "jobs_ahead"
    assert answer.ahead_count == 26 and len(answer.ahead) == 20
    assert answer.figures["ahead"] == "26" and "26 jobs that compete" in answer.next_step
    ahead = {row["job_id"] for row in answer.ahead}
    assert ahead <= {f"h{n}" for n in range(25)}  # the higher tier first
    everything = {row.job_id for row in WorkloadJob.objects.filter(state=JobState.PENDING)}
    assert "same-earlier" in everything


@pytest.mark.parametrize("reason", ["AssocMaxJobsLimit", "AssociationJobLimit"])
def test_a_hand_set_association_limit_is_not_sent_to_a_quota_exception(lab, reason):
    answer = explain(job(lab, "1", reason, gpus=1))
    assert answer.limit == "association_limit" and answer.action_url == ""
    assert "ask ops" in answer.next_step


def test_a_per_user_limit_is_one_set_by_hand_and_not_sent_to_a_quota_exception(lab):
    """Arbiter compiles a tier's per-job cap as MaxTRESPerJob only, so a per-user reason is a
    limit set by hand: its value is not claimed, and ops are asked."""
    rules.tier_update(tier=lab.key, user=lab.ops, reason=REASON, data={"max_gpus_per_job": 8})
    job(lab, "r1", "", gpus=6, running=True, user_name="ana")
    job(lab, "r2", "", gpus=8, running=True, user_name="bo")
    answer = explain(job(lab, "1", "QOSMaxGRESPerUser", gpus=4, user_name="ana"))
    assert answer.limit == "user_cap" and answer.action_url == ""
    assert answer.figures == {"used": "6", "asked": "4"}
    assert "set by hand" in answer.next_step and "ask ops" in answer.next_step


def test_a_job_over_its_tiers_per_job_cap_is_ahead_of_no_one(lab):
    """Slurm shows ``Priority`` for a job over its QOS's per-job cap while others block it;
    it can never start, so it is not counted among the jobs ahead."""
    rules.tier_update(
        tier=lab.production, user=lab.ops, reason=REASON, data={"max_gpus_per_job": 2}
    )
    mine = job(lab, "1", "Priority", gpus=1, tier=lab.regular, minutes=10)
    job(lab, "fits", "Priority", gpus=2, tier=lab.production, minutes=20)
    job(lab, "never", "Priority", gpus=3, tier=lab.production, minutes=20)
    answer = explain(mine)
    assert [row["job_id"] for row in answer.ahead] == ["fits"] and answer.ahead_count == 1
