"""Every limit a member can reach holds on the real Slurm, or the plan says it does not.

One set-up per test, every combination inside it: the QOS kinds a member can use (tier with
a cap, tier without one, guarantee, borrow) × typed and untyped GPU requests × flavors with
and without a quota. Jobs are ``sbatch --wrap 'sleep N'`` as root on the lab node
(4 A100 + 4 H100).
"""

import re
from pathlib import Path

import pytest

from governance import services as rules
from queues import services
from queues.models import Alert, AlertKind, Enforcement, SyncStatus
from queues.services.slurm.submit import TABLE_NAME, table_data, table_text
from tests.conftest import REASON

pytestmark = [pytest.mark.django_db, pytest.mark.slurm]

LIMIT_REASONS = {"AssocGrpGRES", "MaxGRESPerAccount", "QOSGrpGRES", "AssocGrpGRESMinutes"}


def _submit(slurm, *, account: str, gres: str, qos: str = "", seconds: int = 300) -> str:
    options = ["-q", qos] if qos else []
    job = slurm.run(
        "sbatch",
        "--parsable",
        "-o",
        "/dev/null",
        "-A",
        account,
        *options,
        f"--gres={gres}",
        "--wrap",
        f"sleep {seconds}",
    ).strip()
    slurm.jobs.append(job)
    return job


def _settle(slurm, jobs: list[str]) -> dict[str, dict[str, str]]:
    """Wait until every job runs or waits with a specific reason; return their states."""

    def settled() -> bool:
        states = [slurm.job(job) for job in jobs]
        return all(
            s["state"] == "RUNNING" or (s["state"] == "PENDING" and s["reason"] in LIMIT_REASONS)
            for s in states
        )

    slurm.wait_for("the jobs to run or wait for a limit", settled, timeout=40)
    return {job: slurm.job(job) for job in jobs}


def _idle_gpus(slurm) -> int:
    used = slurm.run("sinfo", "-h", "-n", "gpu01", "-O", "GresUsed:200").strip()
    return 8 - sum(int(count) for count in re.findall(r"gpu:[^:,]+:(\d+)", used))


def test_each_qos_kind_holds_the_projects_maximum_for_typed_requests_and_says_so_for_untyped(
    lab, slurm
):
    rules.tier_update(tier=lab.key, user=lab.ops, reason=REASON, data={"max_gpus_total": 3})
    alpha, _quota = lab.project("alpha", tier=lab.key, guarantee=1, borrow=1)  # A100 max 2
    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    how = {row["rule"]: row["how"] for row in run.result["enforcement"]}
    account = lab.account(alpha)
    untyped_rule = "alpha in lab/a100: untyped GPU requests"
    assert how[untyped_rule] == Enforcement.SUBMIT  # the lab runs Arbiter's job_submit plugin
    assert how["alpha in lab/a100: maximum 2 GPUs"] == Enforcement.NATIVE
    assert how["alpha in lab/a100: guarantee 1 GPUs"] == Enforcement.NATIVE
    assert how["Tier Key: at most 3 GPUs across projects"] == Enforcement.NATIVE

    cases = [
        # (QOS, --gres, how many may run)
        ("key", "gpu:a100:1", 2),
        ("regular", "gpu:a100:1", 2),
        ("exploratory", "gpu:a100:1", 2),
        ("lab.alpha.guarantee", "gpu:a100:1", 1),
        ("lab.borrow", "gpu:a100:1", 2),
        # Untyped requests: the untyped total holds where no tier cap replaces it.
        ("regular", "gpu:1", 2),
        ("exploratory", "gpu:1", 2),
        ("lab.alpha.guarantee", "gpu:1", 1),
        ("lab.borrow", "gpu:1", 2),
        # In the capped tier too: the plugin rewrites gpu:1 to gpu:a100:1 (typed limits hold).
        ("key", "gpu:1", 2),
    ]
    failures = []
    # No H100 quota: typed H100 requests are refused at submit time, in any QOS.
    for qos in ("key", "regular", "lab.alpha.guarantee", "lab.borrow"):
        job = slurm.run(
            "sbatch", "-o", "/dev/null", "-A", account, "-q", qos, "--gres=gpu:h100:1",
            "--wrap", "sleep 1", check=False,
        )  # fmt: skip
        if job.strip() or slurm.run("squeue", "-h", "-o", "%i").strip():
            failures.append((qos, "gpu:h100:1", "accepted", job))
    for qos, gres, limit in cases:
        jobs = [_submit(slurm, account=account, gres=gres, qos=qos) for _ in range(limit + 1)]
        states = _settle(slurm, jobs)
        running = [j for j in jobs if states[j]["state"] == "RUNNING"]
        waiting = [states[j]["reason"] for j in jobs if states[j]["state"] == "PENDING"]
        if len(running) != limit or not waiting or _idle_gpus(slurm) != 8 - limit:
            failures.append((qos, gres, len(running), waiting))
        slurm.cancel_all()
    assert failures == []

    # A table older than the rules (here: one that knows no project) lets untyped requests
    # through unchanged; in the capped tier the tier's GrpTRES replaces the project's untyped
    # total, so Slurm lets a third job run: Arbiter's guard requeues and holds the newest one.
    _stale_table(slurm)
    jobs = [_submit(slurm, account=account, gres="gpu:1", qos="key") for _ in range(3)]
    states = _settle(slurm, jobs)
    assert sum(s["state"] == "RUNNING" for s in states.values()) == 3
    requeued = services.guard_check(cluster=lab.cluster)
    assert [item["job"] for item in requeued] == [jobs[-1]]
    _assert_held_by_the_guard(slurm, jobs[-1])
    assert [slurm.job(job)["state"] for job in jobs[:2]] == ["RUNNING", "RUNNING"]
    slurm.cancel_all()


def _stale_table(slurm) -> None:
    """A current-looking submit table compiled from rules that know no project."""
    table = Path(slurm.conf).parent / TABLE_NAME
    table.write_text(table_text(table_data(state={}, cluster_name="arbiter"), expires=2**31))


def _assert_held_by_the_guard(slurm, job: str) -> None:
    slurm.wait_for("the guard's hold", lambda: slurm.job(job)["state"] == "PENDING")
    shown = slurm.run("scontrol", "show", "job", job)
    assert "arbiter guard" in shown
    assert slurm.job(job)["reason"] in {"job requeued in held state", "JobHeldAdmin", "JobHeldUser"}


def test_the_guard_requeues_an_untyped_job_that_lands_on_a_flavor_without_quota(lab, slurm):
    alpha, _quota = lab.project("alpha", borrow=2)  # A100 only
    filler, _quota = lab.project("filler", borrow=4)
    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    busy = [
        _submit(slurm, account=lab.account(filler), gres="gpu:a100:1", qos="regular")
        for _ in range(4)
    ]
    for job in busy:
        slurm.wait_state(job, "RUNNING")
    # The only free GPUs are H100s, where alpha has no quota: with a table older than the
    # rules, an untyped request gets past the plugin and lands there.
    _stale_table(slurm)
    stray = _submit(slurm, account=lab.account(alpha), gres="gpu:1", qos="regular")
    slurm.wait_state(stray, "RUNNING")
    typed = _submit(slurm, account=lab.account(alpha), gres="gpu:h100:1", qos="regular")
    # An untyped job that waits (alpha's untyped total is 2): held before it can start.
    waiting = _submit(slurm, account=lab.account(alpha), gres="gpu:2", qos="regular")
    slurm.wait_for("the job to wait", lambda: slurm.job(waiting)["reason"] == "AssocGrpGRES")

    requeued = services.guard_check(cluster=lab.cluster)

    assert requeued == [
        {"job": stray, "account": "lab.alpha", "over": "gres/gpu:h100", "action": "requeuehold"},
        {"job": waiting, "account": "lab.alpha", "over": "held", "action": "hold"},
    ]
    for job, action in ((stray, "requeuehold"), (waiting, "hold")):
        alert = Alert.objects.get(kind=AlertKind.GUARD_ACTION, key__endswith=f":{job}")
        assert alert.details["action"] == action
    _assert_held_by_the_guard(slurm, stray)
    _assert_held_by_the_guard(slurm, waiting)
    assert slurm.job(typed)["reason"] == "AssocGrpGRES"  # typed: Slurm holds it natively
    assert all(slurm.job(job)["state"] == "RUNNING" for job in busy)


def test_a_tier_cap_holds_across_projects_and_a_job_without_q_runs_at_the_projects_tier(lab, slurm):
    rules.tier_update(tier=lab.key, user=lab.ops, reason=REASON, data={"max_gpus_total": 3})
    alpha, _quota = lab.project("alpha", tier=lab.key, borrow=2)
    beta, _quota = lab.project("beta", tier=lab.key, borrow=4, flavor=lab.h100)
    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.status == SyncStatus.SUCCEEDED, run.error

    # No -q: DefaultQOS is the project's effective tier.
    first = _submit(slurm, account=lab.account(alpha), gres="gpu:a100:1")
    assert slurm.wait_state(first, "RUNNING")["qos"] == "key"
    second = _submit(slurm, account=lab.account(alpha), gres="gpu:a100:1", qos="key")
    slurm.wait_state(second, "RUNNING")
    third = _submit(slurm, account=lab.account(beta), gres="gpu:h100:1", qos="key")
    slurm.wait_state(third, "RUNNING")
    over = _submit(slurm, account=lab.account(beta), gres="gpu:h100:1", qos="key")
    slurm.wait_for("the tier cap", lambda: slurm.job(over)["reason"] == "QOSGrpGRES")
    assert _idle_gpus(slurm) == 5
    # beta may still run in a tier without a cap.
    elsewhere = _submit(slurm, account=lab.account(beta), gres="gpu:h100:1", qos="regular")
    slurm.wait_state(elsewhere, "RUNNING")
