"""A Slurm controller on another host, end to end on the real Slurm: the cluster's table is
pulled (the sync writes nothing beside slurm.conf), and the real pull agent
(deploy/slurm-agent/arbiter-table-agent) fetches it over HTTP from a live Arbiter.

When Arbiter becomes unreachable the agent keeps the last good table, and slurmctld's plugin
goes on holding the rules with it until it expires; after that the cluster's choice holds
(refuse governed GPU jobs, or fall back to Slurm's native limits and the guard), and ops are
alerted either way. The table's life is shortened to a few seconds here
(``ARBITER_SLURM_SUBMIT_TABLE_TTL``; 15 minutes by default).
"""

import time

import pytest

from queues import services
from queues.models import Alert, AlertKind, SubmitTableLapse
from queues.selectors.alerts import alert_text
from queues.services.slurm.submit import table_header
from tests.conftest import REASON
from tests.queues.conftest import delivery_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slurm]

TTL = 25  # seconds: the sync and a few submissions fit in it
UNREACHABLE = "http://127.0.0.1:1"


def _sbatch(slurm, *options: str, account: str, qos: str = "regular") -> tuple[str, str]:
    import subprocess

    done = subprocess.run(
        ["sbatch", "--parsable", "-o", "/dev/null", "-A", account, "-q", qos, *options,
         "--wrap", "sleep 300"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin:/usr/sbin", "SLURM_CONF": slurm.conf},
        cwd=slurm.workdir,
        timeout=60,
        check=False,
    )  # fmt: skip
    job = done.stdout.strip() if done.returncode == 0 else ""
    if job:
        slurm.jobs.append(job)
    return job, done.stderr


@pytest.mark.parametrize("lapse", [SubmitTableLapse.REFUSE, SubmitTableLapse.NATIVE])
def test_the_agent_keeps_the_last_good_table_until_it_expires_then_the_clusters_choice_holds(
    lab, slurm, live_server, settings, lapse
):
    settings.ARBITER_SLURM_SUBMIT_TABLE_TTL = TTL
    services.cluster_update(
        cluster=lab.cluster, user=lab.ops, reason=REASON, data={"submit_table_lapse": lapse}
    )
    delivery = delivery_for("agent", lab, slurm, live_server.url)
    alpha, _quota = lab.project("alpha", borrow=2)  # A100 only, at most 2
    filler, _quota = lab.project("filler", borrow=4)  # fills the A100s
    delivery.sync()
    good = delivery.table.read_bytes()
    _fingerprint, expires = table_header(good.decode()) or ("", 0)
    assert expires > time.time() + 5
    account = lab.account(alpha)
    busy = [_sbatch(slurm, "--gres=gpu:a100:1", account=lab.account(filler))[0] for _ in range(4)]
    assert all(busy)
    for job in busy:
        slurm.wait_state(job, "RUNNING")

    # Arbiter unreachable: the agent fails and keeps the last good table, which holds.
    down = delivery.fetch(UNREACHABLE)
    assert down is not None and down.returncode != 0
    assert "keeping the table in place" in down.stderr
    assert delivery.table.read_bytes() == good
    job, said = _sbatch(slurm, "--gres=gpu:h100:1", account=account)
    assert not job and "no quota for h100" in said
    assert not Alert.objects.filter(kind=AlertKind.SUBMIT_TABLE_EXPIRED).exists()

    # Still unreachable past the table's life: the same (expired) table is in place.
    time.sleep(max(0.0, expires - time.time()) + 1)
    assert delivery.fetch(UNREACHABLE).returncode != 0  # type: ignore[union-attr]
    assert delivery.table.read_bytes() == good
    if lapse == SubmitTableLapse.REFUSE:
        job, said = _sbatch(slurm, "--gres=gpu:1", account=account)
        assert not job and "arbiter_submit_table.lua is expired" in said
        job, said = _sbatch(slurm, account=account)  # no GPUs: none of Arbiter's business
        assert job, said
    else:
        # Native limits: a typed H100 request (no quota) is accepted and Slurm holds it.
        typed, said = _sbatch(slurm, "--gres=gpu:h100:1", account=account)
        assert typed, said
        slurm.wait_for("Slurm's own limit", lambda: slurm.job(typed)["reason"] == "AssocGrpGRES")
        # An untyped one is not rewritten: it lands on the only free GPUs, H100s...
        stray, said = _sbatch(slurm, "--gres=gpu:1", account=account)
        assert stray and "rewrote" not in said, said
        slurm.wait_state(stray, "RUNNING")
    # The guard's minute (Arbiter's side): the table the agent last fetched has expired.
    actions = services.guard_check(cluster=lab.cluster)
    alert = Alert.objects.get(kind=AlertKind.SUBMIT_TABLE_EXPIRED, closed_at=None)
    assert alert.cluster == lab.cluster and alert.details["on_expiry"] == lapse
    _subject, body = alert_text(alert)
    expected = "refuses GPU jobs" if lapse == SubmitTableLapse.REFUSE else "native limits only"
    assert expected in body
    if lapse == SubmitTableLapse.NATIVE:
        # ... and the guard requeues and holds it (no H100 quota), with its own alert.
        assert [(a["job"], a["action"]) for a in actions] == [(stray, "requeuehold")]
        slurm.wait_for("the guard's hold", lambda: slurm.job(stray)["state"] == "PENDING")
        assert "arbiter guard" in slurm.run("scontrol", "show", "job", stray)
        assert Alert.objects.filter(kind=AlertKind.GUARD_ACTION, key__endswith=stray).exists()
    else:
        assert actions == []

    # Arbiter reachable again: the agent fetches the renewed table, the rules hold again,
    # and the next check closes the alert.
    assert delivery.fetch() is not None
    assert delivery.table.read_bytes() != good
    job, said = _sbatch(slurm, "--gres=gpu:h100:1", account=account)
    assert not job and "no quota for h100" in said
    job, said = _sbatch(slurm, "--gres=gpu:1", account=account)
    assert job and "rewrote the untyped request gpu:1 to gpu:a100:1" in said, said
    services.guard_check(cluster=lab.cluster)
    alert.refresh_from_db()
    assert alert.closed_at is not None
