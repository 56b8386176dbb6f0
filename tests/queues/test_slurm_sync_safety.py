"""A sync that cannot hold the rules writes nothing; one that stops halfway is completed by
the next; the cautious class's minimum runtime reaches Slurm (real Slurm)."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from django.conf import settings

from governance import services as rules
from queues import services
from queues.models import SyncStatus
from queues.services.slurm import SlurmCommands
from tests.conftest import REASON

pytestmark = [pytest.mark.django_db, pytest.mark.slurm]


def _objects(slurm) -> tuple[str, str]:
    qos = slurm.sacctmgr("-n", "-P", "show", "qos", "format=name,description,priority,grptres")
    assoc = slurm.sacctmgr("-n", "-P", "show", "assoc", "format=account,user,grptres,qos")
    return qos, assoc


def test_a_pool_with_an_untracked_gres_type_is_refused_with_the_fix_and_nothing_is_written(
    lab, slurm
):
    l40s = rules.flavor_create(
        user=lab.ops,
        reason=REASON,
        slug="l40s",
        name="L40S",
        gpu_model="L40S",
        memory_gb=48,
        gres_type="l40s",
    )
    rules.pool_capacity_set(user=lab.ops, reason=REASON, pool=lab.pool, flavor=l40s, gpus=2)
    lab.project("alpha", guarantee=1, borrow=1, flavor=l40s)
    before = _objects(slurm)

    messages = services.cluster_preflight(cluster=lab.cluster, pools=[lab.pool])
    dry = services.sync_now(cluster=lab.cluster, user=lab.ops, dry_run=True)
    run = services.sync_now(cluster=lab.cluster, user=lab.ops)

    assert len(messages) == 2
    assert "Flavor L40S of pool Lab needs the TRES gres/gpu:l40s" in messages[0]
    assert "AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:h100,gres/gpu:l40s" in messages[0]
    # The nodes are read too: none offers L40S, and the message shows the lines expected.
    assert "asks for GPU type l40s, which no node of cluster lab offers" in messages[1]
    assert "(nodes: gpu01 gpu:a100:4,gpu:h100:4" in messages[1]
    assert "NodeName=<node> Gres=gpu:l40s:2" in messages[1]
    assert "NodeName=<node> Name=gpu Type=l40s File=/dev/nvidia[0-1]" in messages[1]
    for refused in (dry, run):
        assert refused.status == SyncStatus.FAILED
        assert refused.result["preflight"] == messages
        assert refused.result["writes"] == 0
    assert _objects(slurm) == before


class _StopsDbdAfter(SlurmCommands):
    """Stops slurmdbd right after the n-th write, as a crash halfway through a sync would."""

    def __init__(self, *, writes_before_stop: int, pidfile: Path, **kwargs):
        super().__init__(**kwargs)
        self.writes_before_stop = writes_before_stop
        self.pidfile = pidfile

    def run(self, args, **kwargs):
        out = super().run(args, **kwargs)
        if kwargs.get("write") and self.writes == self.writes_before_stop:
            os.kill(int(self.pidfile.read_text().strip()), signal.SIGTERM)
            time.sleep(2)
        return out


def test_a_sync_killed_halfway_is_failed_stays_due_and_the_next_sync_converges(lab, slurm):
    from queues import selectors
    from queues.services.slurm import SlurmBackend

    rules.tier_update(tier=lab.key, user=lab.ops, reason=REASON, data={"max_gpus_total": 6})
    lab.project("alpha", tier=lab.key, guarantee=1, borrow=1)
    lab.project("beta", guarantee=2, borrow=None, flavor=lab.h100)
    from governance.models import RevisionTrigger

    rules.rules_revision_create(trigger=RevisionTrigger.MANUAL)
    state_dir = Path(slurm.conf).parent.parent
    commands = _StopsDbdAfter(
        writes_before_stop=1,
        pidfile=state_dir / "run" / "slurmdbd.pid",
        slurm_conf=slurm.conf,
        timeout=30,
    )
    backend = SlurmBackend(cluster_name=lab.cluster.slurm_cluster, commands=commands)
    try:
        first = services.sync_now(cluster=lab.cluster, user=lab.ops, backend=backend)
    finally:
        # Start slurmdbd again (up.sh leaves running daemons alone).
        subprocess.run(
            ["bash", str(Path(settings.BASE_DIR) / "deploy" / "slurm" / "up.sh")],
            env={**os.environ, "ARBITER_SLURM_DIR": str(state_dir)},
            capture_output=True,
            timeout=180,
            check=True,
        )
    assert first.status == SyncStatus.FAILED, first.error
    assert selectors.sync_due(lab.cluster)
    # Some QOS exist already, all marked as Arbiter's.
    qos = slurm.sacctmgr("-n", "-P", "show", "qos", "format=name,description")
    made = [line for line in qos.splitlines() if not line.startswith("normal|")]
    assert made and all("|arbiter:" in line for line in made)

    second = services.sync_now(cluster=lab.cluster, user=lab.ops)

    assert second.status == SyncStatus.SUCCEEDED, second.error
    assert second.result["conflicts"] == 0
    assert not selectors.sync_due(lab.cluster)
    assert services.drift_check(cluster=lab.cluster).drift == []


def test_a_cautious_borrower_runs_its_minimum_time_before_it_is_requeued(lab, slurm):
    cautious = rules.preemption_class_create(
        user=lab.ops,
        reason=REASON,
        slug="cautious",
        name="Cautious",
        kind="cautious",
        business_impact="Long training, checkpoints hourly.",
        min_runtime_minutes=1,
        max_preemptions_per_day=2,
    )
    borrower, _quota = lab.project("gamma", borrow=4, preemption_class=cautious, flavor=lab.h100)
    owner, _quota = lab.project("delta", guarantee=4, borrow=0, flavor=lab.h100)
    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    how = {row["rule"]: (row["how"], row["detail"]) for row in run.result["enforcement"]}
    assert how["gamma: class Cautious, at most 2 preemptions a day"][0] == "not_enforced"
    assert how["gamma: class Cautious, 1 minutes before preemption, 0 minutes grace"][0] == "native"

    job = slurm.run(
        "sbatch",
        "--parsable",
        "-o",
        "/dev/null",
        "-A",
        lab.account(borrower),
        "-q",
        "lab.borrow.cautious",
        "--gres=gpu:h100:4",
        "--wrap",
        "sleep 600",
    ).strip()
    slurm.jobs.append(job)
    slurm.wait_state(job, "RUNNING")
    started = time.monotonic()
    reclaim = slurm.run(
        "sbatch",
        "--parsable",
        "-o",
        "/dev/null",
        "-A",
        lab.account(owner),
        "-q",
        "lab.delta.guarantee",
        "--gres=gpu:h100:4",
        "--wrap",
        "sleep 600",
    ).strip()
    slurm.jobs.append(reclaim)
    time.sleep(20)
    assert slurm.job(job)["state"] == "RUNNING"  # an allowed borrower is gone in ~1 s
    slurm.wait_state(reclaim, "RUNNING", timeout=90)
    assert time.monotonic() - started >= 40  # ran its minute (counted from its start)
    assert slurm.job(job)["restarts"] == "1"


def test_cautious_work_in_a_preemptible_tier_qos_runs_its_minimum_time_before_it_is_requeued(
    lab, slurm
):
    cautious = rules.preemption_class_create(
        user=lab.ops,
        reason=REASON,
        slug="cautious",
        name="Cautious",
        kind="cautious",
        business_impact="Long training, checkpoints hourly.",
        min_runtime_minutes=1,
    )
    # Regular is preemptible by Production; gamma's work there is cautious, epsilon's is not.
    gamma, _quota = lab.project(
        "gamma", tier=lab.regular, borrow=2, preemption_class=cautious, flavor=lab.h100
    )
    epsilon, _quota = lab.project("epsilon", tier=lab.regular, borrow=2, flavor=lab.h100)
    prod, _quota = lab.project("prod", tier=lab.production, borrow=4, flavor=lab.h100)
    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    lab.cluster.sync_state.refresh_from_db()
    applied = lab.cluster.sync_state.applied_state
    qos = applied["qos"]
    assert qos["regular.cautious"]["preempt_exempt_time"] == "60"
    assert "regular.cautious" in qos["production"]["preempt"].split(",")
    assoc = applied["association"]
    assert assoc[f"root@{lab.account(gamma)}"]["default_qos"] == "regular.cautious"
    assert "regular" not in assoc[f"root@{lab.account(gamma)}"]["qos"].split(",")

    # Submitted without -q: each project's default QOS (its tier, the cautious copy for gamma).
    careful = slurm.run(
        "sbatch", "--parsable", "-o", "/dev/null", "-A", lab.account(gamma),
        "--gres=gpu:h100:2", "--wrap", "sleep 600",
    ).strip()  # fmt: skip
    plain = slurm.run(
        "sbatch", "--parsable", "-o", "/dev/null", "-A", lab.account(epsilon),
        "--gres=gpu:h100:2", "--wrap", "sleep 600",
    ).strip()  # fmt: skip
    slurm.jobs += [careful, plain]
    assert slurm.wait_state(careful, "RUNNING")["qos"] == "regular.cautious"
    slurm.wait_state(plain, "RUNNING")
    started = time.monotonic()

    def reclaim() -> str:
        job = slurm.run(
            "sbatch", "--parsable", "-o", "/dev/null", "-A", lab.account(prod), "-q",
            "production", "--gres=gpu:h100:2", "--wrap", "sleep 600",
        ).strip()  # fmt: skip
        slurm.jobs.append(job)
        return job

    # Production needs two H100s: Slurm requeues the plain job, never the exempt one.
    first = reclaim()
    slurm.wait_state(first, "RUNNING")
    assert slurm.job(plain)["restarts"] == "1"
    assert slurm.job(careful)["state"] == "RUNNING"
    assert slurm.job(careful)["restarts"] == "0"
    # Two more: the cautious job keeps them for its minute, then it is requeued.
    second = reclaim()
    time.sleep(10)
    assert slurm.job(careful)["state"] == "RUNNING"
    assert slurm.job(second)["state"] == "PENDING"
    slurm.wait_state(second, "RUNNING", timeout=120)
    assert time.monotonic() - started >= 40  # ran its minute (counted from its start)
    assert slurm.job(careful)["restarts"] == "1"
