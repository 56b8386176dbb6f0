"""A real Slurm schedules as the synced rules say (jobs are `sbatch --wrap 'sleep N'`).

Each test builds rules through the governance services, syncs them through the queues
services, submits jobs as root and asserts on squeue. The node has 4 A100 and 4 H100 GPUs;
an untyped request (``--gres=gpu:N``) of a project with one GPU type is rewritten to that type
at submit time (``job_submit.lua``), so each test sizes its jobs to one type's 4 GPUs.
"""

import time
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from governance import services as rules
from governance.models import GrantKind, Terms
from queues import services
from queues.models import SyncStatus
from tests.conftest import REASON, login

pytestmark = pytest.mark.django_db


def _sync(lab) -> None:
    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.status == SyncStatus.SUCCEEDED, run.error


def test_a_higher_tier_starts_before_an_earlier_lower_tier_job(lab, slurm):
    alpha, _quota = lab.project("alpha", tier=lab.key, guarantee=4, borrow=0)
    other, _quota = lab.project("other", tier=lab.key, borrow=4)
    _sync(lab)
    account = lab.account(alpha)
    filler = slurm.sbatch(account=lab.account(other), qos="key", gpus=4)  # every A100
    slurm.wait_state(filler, "RUNNING")
    low = slurm.sbatch(account=account, qos="exploratory", gpus=4)
    time.sleep(1)
    high = slurm.sbatch(account=account, qos="key", gpus=4)
    slurm.wait_for(
        "both to wait for GPUs",
        lambda: {slurm.job(low)["reason"], slurm.job(high)["reason"]} <= {"Resources", "Priority"},
    )

    slurm.run("scancel", filler)

    slurm.wait_state(high, "RUNNING")
    assert slurm.job(low)["state"] == "PENDING"


def test_a_project_at_its_quota_waits_with_a_quota_reason_while_gpus_are_idle(lab, slurm):
    beta, _quota = lab.project("beta", guarantee=2, borrow=0)
    _sync(lab)
    account = lab.account(beta)
    running = [slurm.sbatch(account=account, qos="regular", gpus=1) for _ in range(2)]
    for job in running:
        slurm.wait_state(job, "RUNNING")
    waiting = slurm.sbatch(account=account, qos="regular", gpus=1)
    slurm.wait_for("the quota reason", lambda: slurm.job(waiting)["reason"] == "AssocGrpGRES")
    assert slurm.job(waiting)["state"] == "PENDING"
    idle = slurm.run("sinfo", "-h", "-n", "gpu01", "-O", "GresUsed:100").strip()
    assert "gpu:a100:2" in idle or "gpu:h100:2" in idle or "gpu:2" in idle  # 6 of 8 idle


def test_a_quota_exception_lets_the_waiting_job_start_and_its_expiry_restores_the_limit(lab, slurm):
    gamma, _quota = lab.project("gamma", guarantee=2, borrow=0)
    _sync(lab)
    account = lab.account(gamma)
    for _ in range(2):
        slurm.wait_state(slurm.sbatch(account=account, qos="regular", gpus=1), "RUNNING")
    waiting = slurm.sbatch(account=account, qos="regular", gpus=1)
    slurm.wait_for("the quota reason", lambda: slurm.job(waiting)["reason"] == "AssocGrpGRES")

    now = timezone.now()
    grant = rules.grant_create(
        user=lab.ops,
        reason=REASON,
        project=gamma,
        terms=Terms(
            kind=GrantKind.QUOTA_EXCEPTION,
            pool=lab.pool,
            flavor=lab.a100,
            extra_gpus=1,
            starts_at=now - timedelta(minutes=1),
            ends_at=now + timedelta(seconds=8),
        ),
    )
    _sync(lab)
    slurm.wait_state(waiting, "RUNNING", timeout=20)

    # The time box ends: the beat service expires the grant, the next sync lowers the limit.
    time.sleep(max((grant.ends_at - timezone.now()).total_seconds(), 0) + 0.5)
    assert [g.pk for g in rules.grants_transition(now=timezone.now())] == [grant.pk]
    _sync(lab)
    limit = slurm.sacctmgr(
        "-n", "-P", "show", "assoc", "where", f"account={account}", "user=", "format=grptres"
    )
    assert "gres/gpu=2" in limit.strip().split(",")
    late = slurm.sbatch(account=account, qos="regular", gpus=1)
    slurm.wait_for("the quota reason again", lambda: slurm.job(late)["reason"] == "AssocGrpGRES")


def test_a_tier_preempts_a_lower_tier_but_never_a_forbidden_class_job(lab, slurm):
    batch, _quota = lab.project("batch", tier=lab.regular, borrow=4)
    serving, _quota = lab.project(
        "serving", tier=lab.regular, borrow=4, preemption_class=lab.forbidden, flavor=lab.h100
    )
    prod, _quota = lab.project("prod", tier=lab.production, borrow=4)
    _sync(lab)
    victim = slurm.sbatch(account=lab.account(batch), qos="regular", gpus=4)
    protected = slurm.sbatch(account=lab.account(serving), qos="regular-protected", gpus=4)
    slurm.wait_state(victim, "RUNNING")
    slurm.wait_state(protected, "RUNNING")

    urgent = slurm.sbatch(account=lab.account(prod), qos="production", gpus=4)

    slurm.wait_state(urgent, "RUNNING")
    assert slurm.job(victim)["restarts"] == "1"
    assert slurm.job(protected) | {"restarts": slurm.job(protected)["restarts"]} == {
        "state": "RUNNING",
        "reason": "None",
        "qos": "regular-protected",
        "restarts": "0",
    }


def test_a_borrowed_guarantee_is_reclaimed_when_its_owner_submits(lab, slurm):
    owner, _quota = lab.project("owner", guarantee=4, borrow=0)
    borrower, _quota = lab.project("borrower", guarantee=0, borrow=4)
    rules.quota_create(
        user=lab.ops,
        reason=REASON,
        project=borrower,
        pool=lab.pool,
        flavor=lab.h100,
        guarantee=0,
        borrow_limit=4,
        preemption_class=lab.allowed,
    )
    _sync(lab)
    # The borrower runs on every GPU: the owner's A100s (borrowed) and the H100s.
    borrowed = [
        slurm.sbatch(account=lab.account(borrower), qos="lab.borrow", gpus=f"{kind}:4")
        for kind in ("a100", "h100")
    ]
    for job in borrowed:
        slurm.wait_state(job, "RUNNING")

    mine = slurm.sbatch(account=lab.account(owner), qos="lab.owner.guarantee", gpus=4)

    slurm.wait_state(mine, "RUNNING")
    # Only the A100 job made way; the H100 job held nothing the owner needed.
    assert [slurm.job(job)["restarts"] for job in borrowed] == ["1", "0"]


def test_a_queue_jump_moves_the_named_pending_job_ahead_until_its_grant_ends(lab, slurm):
    team, _quota = lab.project("team", borrow=4)  # the default tier: regular
    other, _quota = lab.project("other", tier=lab.key, borrow=4)
    _sync(lab)
    filler = slurm.sbatch(account=lab.account(other), qos="key", gpus=4)  # every A100
    slurm.wait_state(filler, "RUNNING")
    first = slurm.sbatch(account=lab.account(team), qos="regular", gpus=4)
    later = slurm.sbatch(account=lab.account(team), qos="regular", gpus=4)
    now = timezone.now()
    grant = rules.grant_create(
        user=lab.ops,
        reason=REASON,
        project=team,
        terms=Terms(
            kind=GrantKind.QUEUE_JUMP,
            tier=lab.key,
            job_ids=(later, "999999"),
            starts_at=now - timedelta(minutes=1),
            ends_at=now + timedelta(hours=1),
        ),
    )

    dry = services.sync_now(cluster=lab.cluster, user=lab.ops, dry_run=True)
    jobs = {c["name"]: c for c in dry.plan if c["kind"] == "job"}
    assert jobs[later]["fields"] == [{"field": "qos", "live": "regular", "desired": "key"}]
    assert jobs["999999"]["action"] == "skip"
    assert slurm.job(later)["qos"] == "regular"  # a dry run writes nothing
    page = login(lab.ops).get(reverse("sync_run_detail", args=["lab", dry.pk]))
    assert f"job <code>{later}</code>" in page.content.decode()

    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    assert {(c["kind"], c["name"], c["action"]) for c in run.plan} == {
        ("association", f"root@{lab.account(team)}", "update"),  # now allows QOS key
        ("job", later, "update"),
        ("job", "999999", "skip"),
    }
    assert (slurm.job(first)["qos"], slurm.job(later)["qos"]) == ("regular", "key")
    assert services.sync_now(cluster=lab.cluster, user=lab.ops).result["writes"] == 0

    slurm.run("scancel", filler)

    slurm.wait_state(later, "RUNNING")
    assert slurm.job(first)["state"] == "PENDING"
    assert services.sync_now(cluster=lab.cluster, user=lab.ops).result["writes"] == 0

    rules.grant_revoke(grant=grant, user=lab.ops, reason=REASON)
    ended = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert ended.status == SyncStatus.SUCCEEDED, ended.error
    assert [(c["kind"], c["action"]) for c in ended.plan] == [("association", "update")]
    assert slurm.job(later) | {"restarts": "0"} == {
        "state": "RUNNING",
        "reason": "None",
        "qos": "key",
        "restarts": "0",
    }
    assert (slurm.job(first)["state"], slurm.job(first)["qos"]) == ("PENDING", "regular")
    assert services.sync_now(cluster=lab.cluster, user=lab.ops).result["writes"] == 0
