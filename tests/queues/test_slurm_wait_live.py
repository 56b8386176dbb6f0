"""Every figure of a wait answer comes from the live cluster, checked against Slurm's own
commands read at the same moment.

Each wait category is made for real on the lab (4 A100 + 4 H100): project quota, tier cap,
a per-job cap, a limit set by hand, a hold and a dependency in one phase; resources and
priority (jobs ahead) in a second, with Arbiter's declared capacity differing from the
node; an ``--exclusive`` job that can never start in a third.
"""

import re

import pytest

from governance import services as rules
from queues import services
from queues.models import SyncStatus, WorkloadJob
from queues.selectors import job_wait_explanation
from queues.services.workload import collect_cluster
from tests.conftest import REASON

pytestmark = [pytest.mark.django_db, pytest.mark.slurm]


def _tres(text: str, key: str) -> tuple[int | None, int]:
    """``gres/gpu:a100=1(1)`` in assoc_mgr output → (limit, use)."""
    found = re.search(rf"(?:^|[=,]){re.escape(key)}=(N|\d+)\((\d+)\)", text)
    assert found, (key, text)
    return (None if found[1] == "N" else int(found[1])), int(found[2])


def _account_row(slurm, account: str) -> str:
    out = slurm.run("scontrol", "show", "assoc_mgr", "flags=assoc", f"accounts={account}")
    block = out.split(f"Account={account} UserName= ")[1].split("ClusterName=")[0]
    return re.search(r"GrpTRES=(\S+)", block)[1]  # type: ignore[index]


def _answer(lab, job_id: str):
    result = collect_cluster(cluster=lab.cluster)
    assert result.ok, result.error
    job = WorkloadJob.objects.select_related("project", "tier", "flavor", "cluster").get(
        source=lab.cluster.name, job_id=job_id
    )
    return job_wait_explanation(job, live=services.job_live_wait(job))


def _wait_reasons(slurm, expected: dict[str, str]) -> None:
    def settled() -> bool:
        return all(slurm.job(job)["reason"] == want for job, want in expected.items())

    try:
        slurm.wait_for("every reason to settle", settled, timeout=60)
    except AssertionError as error:
        raise AssertionError(f"{error}: {[slurm.job(j) for j in expected]}") from None


def test_each_wait_category_answers_with_slurms_own_figures(lab, slurm):
    kw = {"user": lab.ops, "reason": REASON}
    rules.tier_update(**kw, tier=lab.key, data={"max_gpus_total": 2})
    alpha, _q = lab.project("alpha", tier=lab.regular, borrow=1)
    beta, _q = lab.project("beta", tier=lab.key, borrow=4)
    gamma, _q = lab.project("gamma", tier=lab.regular, borrow=4, flavor=lab.h100)
    delta, _q = lab.project("delta", tier=lab.regular, borrow=4, flavor=lab.h100)
    eps, _q = lab.project("eps", tier=lab.exploratory, borrow=4, flavor=lab.h100)
    prod, _q = lab.project("prod", tier=lab.production, borrow=4, flavor=lab.h100)
    low, _q = lab.project("low", tier=lab.exploratory, borrow=4, flavor=lab.h100)
    assert services.sync_now(cluster=lab.cluster, user=lab.ops).status == SyncStatus.SUCCEEDED
    acc = lab.account

    # --- phase 1: quota, tier cap, per-job cap, hand-set limit, hold, dependency ---------
    a1 = slurm.sbatch(account=acc(alpha), qos="regular", gpus="a100:1")
    b1 = slurm.sbatch(account=acc(beta), qos="key", gpus="a100:2")
    slurm.wait_state(a1, "RUNNING")
    slurm.wait_state(b1, "RUNNING")
    a2 = slurm.sbatch(account=acc(alpha), qos="regular", gpus="a100:1")
    b2 = slurm.sbatch(account=acc(beta), qos="key", gpus="a100:1")
    g1 = slurm.sbatch("-H", account=acc(gamma), qos="regular", gpus="h100:2")
    # The tier's per-job cap drops to 1 while gamma's 2-GPU job waits.
    rules.tier_update(**kw, tier=lab.regular, data={"max_gpus_per_job": 1})
    assert services.sync_now(cluster=lab.cluster, user=lab.ops).status == SyncStatus.SUCCEEDED
    slurm.run("scontrol", "release", g1)
    # A limit set by hand on a member's association (drift, until the next sync).
    slurm.sacctmgr(
        "-i", "modify", "user", "root", "where", f"account={acc(delta)}", "set", "MaxJobs=0"
    )
    d1 = slurm.sbatch(account=acc(delta), qos="regular", gpus="h100:1")
    h1 = slurm.sbatch("-H", account=acc(eps), qos="exploratory", gpus="h100:1")
    e1 = slurm.sbatch("-d", f"afterok:{a1}", account=acc(eps), qos="exploratory", gpus="h100:1")
    _wait_reasons(
        slurm,
        {
            a2: "AssocGrpGRES",
            b2: "QOSGrpGRES",
            g1: "QOSMaxGRESPerJob",
            d1: "AssocMaxJobsLimit",
            h1: "JobHeldUser",
            e1: "Dependency",
        },
    )

    quota = _answer(lab, a2)
    limit, used = _tres(_account_row(slurm, acc(alpha)), "gres/gpu:a100")
    assert quota.limit == "project_quota" and quota.diagnosis.live
    assert quota.figures == {"used": str(used), "limit": str(limit), "asked": "1"}
    assert (limit, used) == (1, 1)

    tier = _answer(lab, b2)
    out = slurm.run("scontrol", "show", "assoc_mgr", "flags=qos", "qos=key")
    limit, used = _tres(out, "gres/gpu")
    assert tier.limit == "tier_cap"
    assert tier.figures["used"] == str(used) == "2" and tier.figures["limit"] == str(limit)
    assert "room" not in tier.next_step

    per_job = _answer(lab, g1)
    maxtres = slurm.sacctmgr("-n", "-P", "show", "qos", "where", "name=regular", "format=maxtres")
    assert maxtres.strip() == "gres/gpu=1"
    assert per_job.limit == "per_job" and per_job.diagnosis.can_never_start
    assert per_job.figures == {"asked": "2", "limit": "1"}
    assert "--gres=gpu:h100:1" in per_job.next_step

    hand = _answer(lab, d1)
    maxjobs = slurm.sacctmgr(
        "-n",
        "-P",
        "show",
        "assoc",
        "where",
        f"account={acc(delta)}",
        "user=root",
        "format=maxjobs",
    ).strip()
    assert hand.limit == "association_limit" and maxjobs == "0"
    assert f"MaxJobs={maxjobs} (root@{acc(delta)})" in hand.next_step
    assert hand.figures["limit"] == maxjobs

    held = _answer(lab, h1)
    assert held.limit == "hold" and "JobHeldUser" in held.next_step

    dep = _answer(lab, e1)
    dependency = slurm.run("squeue", "-h", "-j", e1, "-o", "%E").strip()
    assert dep.limit == "dependency" and dependency in dep.next_step
    assert f"{a1} (RUNNING)" in dep.next_step

    slurm.cancel_all()
    # --- phase 2: resources and priority; the pool declares more H100 than the node has ---
    rules.pool_capacity_set(**kw, pool=lab.pool, flavor=lab.h100, gpus=8)
    p1 = slurm.sbatch(account=acc(prod), qos="production", gpus="h100:4")
    slurm.wait_state(p1, "RUNNING")
    r1 = slurm.sbatch(account=acc(gamma), qos="regular", gpus="h100:1")
    q1 = slurm.sbatch(account=acc(low), qos="exploratory", gpus="h100:1")
    _wait_reasons(slurm, {r1: "Resources", q1: "Priority"})

    resources = _answer(lab, r1)
    node = slurm.run("scontrol", "show", "node", "-o")
    total = int(re.search(r"CfgTRES=\S*gres/gpu:h100=(\d+)", node)[1])  # type: ignore[index]
    alloc = int(re.search(r"AllocTRES=\S*gres/gpu:h100=(\d+)", node)[1])  # type: ignore[index]
    assert resources.limit == "pool_capacity"
    assert resources.figures == {
        "capacity": str(total),
        "running": str(alloc),
        "free": str(total - alloc),
        "asked": "1",
    }
    assert "declare 8" in resources.next_step  # declared capacity ≠ the nodes: said

    queue = _answer(lab, q1)
    pending = slurm.run("squeue", "-h", "-t", "PD", "--sort=-p", "-o", "%i|%Q|%r").splitlines()
    mine = next(int(p.split("|")[1]) for p in pending if p.startswith(f"{q1}|"))
    ahead = [p.split("|")[0] for p in pending if int(p.split("|")[1]) > mine]
    assert queue.limit == "jobs_ahead"
    assert [a["job_id"] for a in queue.ahead] == ahead == [r1]
    assert queue.ahead_count == 1 and queue.figures["ahead"] == "1"

    slurm.cancel_all()
    # --- phase 3: --exclusive gets every GPU of the node, H100 included: never ---------------
    x1 = slurm.run(
        "sbatch",
        "--parsable",
        "-o",
        "/dev/null",
        "-A",
        acc(alpha),
        "-q",
        "exploratory",
        "--exclusive",
        "--gres=gpu:a100:1",
        "--wrap",
        "sleep 300",
    ).strip()
    slurm.jobs.append(x1)
    _wait_reasons(slurm, {x1: "AssocGrpGRES"})
    exclusive = _answer(lab, x1)
    limit, _used = _tres(_account_row(slurm, acc(alpha)), "gres/gpu:h100")
    assert exclusive.limit == "project_quota" and exclusive.diagnosis.can_never_start
    assert limit == 0 and exclusive.figures["limit"] == "0"
    assert "--exclusive" in exclusive.next_step and "without --exclusive" in exclusive.next_step
