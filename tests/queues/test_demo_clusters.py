"""The demo's clusters (issue 38): ``seed_demo_workload`` seeds a Kueue cluster serving the
training pool and a Slurm cluster serving the inference pool, both disabled, and records each
demo job on its pool's cluster in its scheduler's words. Nothing reaches a scheduler: no sync
is queued, and every beat task and a job's live answer pass the demo's clusters by. Loading
twice stores nothing twice."""

from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import call_command

from governance import services as rules
from governance.models import User
from queues import services
from queues.models import Cluster, ClusterBackend, JobState, SyncRun, WaitCategory, WorkloadJob
from queues.replay.adapt import scheduler_model
from queues.replay.slurm_conf import SlurmSettings
from queues.services.demo import DEMO_CLUSTERS, demo_clusters_ensure

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 20, 9, tzinfo=UTC)


@pytest.fixture
def demo(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    rules.demo_seed(password="pw", now=NOW)
    call_command("seed_demo_workload", "--days", "3", stdout=StringIO())


def test_the_demo_has_a_kueue_and_a_slurm_cluster_both_disabled(demo):
    clusters = {cluster.name: cluster for cluster in Cluster.objects.all()}
    assert set(clusters) == {name for name, _pools, _settings in DEMO_CLUSTERS}
    kueue, slurm = clusters["training-kueue"], clusters["inference-slurm"]
    assert kueue.backend == ClusterBackend.KUEUE and slurm.backend == ClusterBackend.SLURM
    assert [pool.slug for pool in kueue.pools.all()] == ["training"]
    assert [pool.slug for pool in slurm.pools.all()] == ["inference"]
    assert not kueue.enabled and not slurm.enabled
    assert kueue.kube_api_server.startswith("https://") and ".invalid" in kueue.kube_api_server
    # Created as the rest of the demo: by ops, for the demo's reason, with history.
    ops = User.objects.get(username="ops")
    for cluster in (kueue, slurm):
        records = list(cluster.history.all())
        assert records and {(r.history_user, r.history_change_reason) for r in records} == {
            (ops, "Demo data")
        }
    # No slurm.conf: the replay models Slurm's defaults, never a file of this machine.
    assert slurm.slurm_conf == ""
    model = scheduler_model(slurm)
    assert model.scheduler == "slurm" and model.slurm is not None
    assert model.slurm.nodes == SlurmSettings().nodes
    assert scheduler_model(kueue).scheduler == "kueue"


def test_each_demo_job_is_on_its_pools_cluster_in_its_schedulers_words(demo):
    jobs = WorkloadJob.objects.filter(source="demo").select_related("cluster")
    assert jobs.exists() and not jobs.filter(cluster__isnull=True).exists()
    kueue = jobs.filter(cluster__name="training-kueue")
    slurm = jobs.filter(cluster__name="inference-slurm")
    assert kueue.exists() and slurm.exists()
    # Kueue's words for its waits (no Slurm reason code), the engine's categories kept.
    kueue_reasons = set(kueue.exclude(reason="").values_list("reason", flat=True))
    assert kueue_reasons <= {"Pending", "Deactivated", "NoMatchingFlavor", "Preempted"}, (
        kueue_reasons
    )
    slurm_reasons = set(slurm.exclude(reason="").values_list("reason", flat=True))
    assert slurm_reasons and not slurm_reasons & {"Pending", "Deactivated", "NoMatchingFlavor"}
    waiting = kueue.filter(reason="Pending").first()
    assert waiting is not None and "insufficient unused quota" in waiting.message
    member = kueue.get(user_name="member", state=JobState.PENDING, reason="NoMatchingFlavor")
    assert member.category == WaitCategory.PLACEMENT
    # What no rule decides waits on Slurm, in Slurm's words (Kueue knows no dependencies).
    assert slurm.filter(reason="Dependency", category=WaitCategory.DEPENDENCY).exists()


def test_nothing_reaches_a_scheduler(demo):
    assert not SyncRun.objects.exists()
    assert services.sync_enqueue_due() == []
    assert services.collect_enqueue_all() == []
    assert services.out_of_sync_check() == []
    assert services.drift_check_all() == []
    assert services.guard_check_all() == {}
    assert services.kueue_enforce_all() == []
    pending = WorkloadJob.objects.filter(state=JobState.PENDING, cluster__isnull=False)
    assert all(services.job_live_wait(job) is None for job in pending[:20])
    # The rules check reads the demo's jobs on their clusters and finds nothing amiss.
    assert services.rules_check()["open"] == 0


def test_loading_twice_stores_nothing_twice(demo):
    clusters = list(Cluster.objects.values_list("pk", "name"))
    history = Cluster.history.count()
    jobs = WorkloadJob.objects.count()
    out = StringIO()
    call_command("seed_demo_workload", "--days", "3", stdout=out)
    assert "0 jobs new" in out.getvalue()
    assert list(Cluster.objects.values_list("pk", "name")) == clusters
    assert Cluster.history.count() == history
    assert WorkloadJob.objects.count() == jobs
    assert set(demo_clusters_ensure()) == {name for name, _pools, _settings in DEMO_CLUSTERS}
    assert Cluster.history.count() == history
