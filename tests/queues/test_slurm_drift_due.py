"""Drift in every limit field of Arbiter's objects marks the cluster due, and a failed sync
is retried like any due one (real Slurm)."""

import pytest

from queues import selectors, services
from queues.models import SyncDueReason, SyncStatus
from queues.services.slurm import SlurmCommands

pytestmark = [pytest.mark.django_db, pytest.mark.slurm]


def test_a_limit_set_by_hand_on_a_members_association_is_drift_makes_the_cluster_due_and_the_sync_clears_it(  # noqa: E501
    lab, slurm
):
    alpha, _quota = lab.project("alpha", borrow=2)
    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    account = lab.account(alpha)
    slurm.sacctmgr(
        "-i", "modify", "user", "where", "name=root", f"account={account}", "cluster=arbiter",
        "set", "MaxJobs=0", "GrpTRES=gres/gpu=1",
    )  # fmt: skip
    slurm.sacctmgr(
        "-i", "modify", "account", "where", f"name={account}", "cluster=arbiter",
        "set", "MaxSubmit=3",
    )  # fmt: skip

    state = services.drift_check(cluster=lab.cluster)

    found = {(item["kind"], item["name"], item["field"]): item["live"] for item in state.drift}
    assert found[("association", f"root@{account}", "max_jobs")] == "0"
    assert found[("association", f"root@{account}", "grp_tres")] == "gres/gpu=1"
    assert found[("account", account, "max_submit")] == "3"
    assert state.due_reason == SyncDueReason.DRIFT
    assert services.sync_is_due(cluster=lab.cluster)
    assert selectors.sync_due(lab.cluster)
    assert [r.pk for r in services.sync_enqueue_due()]  # the periodic sync picks it up

    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    assoc = slurm.sacctmgr(
        "-n", "-P", "show", "assoc", "where", f"account={account}", "user=root",
        "format=maxjobs,grptres",
    )  # fmt: skip
    assert assoc.strip() == "|"
    assert services.drift_check(cluster=lab.cluster).drift == []
    assert not services.sync_is_due(cluster=lab.cluster)
    job = slurm.sbatch(account=account, qos="regular", gpus=1, seconds=30)
    slurm.wait_state(job, "RUNNING")


def test_a_failed_manual_sync_keeps_the_cluster_due_until_a_sync_succeeds(lab, slurm, tmp_path):
    lab.project("alpha", borrow=2)
    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    assert not services.sync_is_due(cluster=lab.cluster)

    # A Slurm that does not answer: a slurm.conf pointing at no controller.
    dead = tmp_path / "slurm.conf"
    dead.write_text(
        "ClusterName=arbiter\nSlurmctldHost=localhost\nSlurmctldPort=1\n"
        "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStoragePort=1\n"
    )
    backend = services.SlurmBackend(
        cluster_name="arbiter", commands=SlurmCommands(slurm_conf=str(dead), timeout=10)
    )
    failed = services.sync_now(cluster=lab.cluster, user=lab.ops, backend=backend)

    assert failed.status == SyncStatus.FAILED
    lab.cluster.sync_state.refresh_from_db()
    assert lab.cluster.sync_state.due_reason == SyncDueReason.FAILED
    assert services.sync_is_due(cluster=lab.cluster)  # so the task retries, not gives up
    assert services.sync_enqueue_due()
    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    assert not services.sync_is_due(cluster=lab.cluster)
