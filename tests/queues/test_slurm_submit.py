"""Rules checked at submit time on the real Slurm: Arbiter's job_submit plugin and its table.

The lab (deploy/slurm/up.sh) runs the plugin (``JobSubmitPlugins=lua``, job_submit.lua beside
slurm.conf). The table gets there two ways (the ``delivery`` fixture): each sync writes it
there, or, for a controller on another host, the sync writes nothing and only the real pull
agent (deploy/slurm-agent) puts it there, fetched over HTTP from a live Arbiter. Jobs are
``sbatch --wrap 'sleep N'`` as root on the lab node (4 A100 + 4 H100). The truth test samples
the running jobs every second for its whole length: no project ever holds more GPUs than its
rules allow, for every QOS a member can use and every request form Slurm 22.05 has
(``--tres-per-job`` is not an sbatch option there).
"""

import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from governance import services as rules
from queues import services
from queues.models import SyncStatus
from queues.services.slurm.submit import TABLE_NAME, plugin_version, table_data, table_text
from tests.conftest import REASON

pytestmark = [pytest.mark.django_db, pytest.mark.slurm]

# Every GPU request form of sbatch 22.05, untyped and typed (one GPU each).
FORMS = {
    "--gres untyped": ["--gres=gpu:1"],
    "--gres typed": ["--gres=gpu:{type}:1"],
    "--gpus untyped": ["--gpus=1"],
    "--gpus typed": ["--gpus={type}:1"],
    "--gpus-per-node untyped": ["--gpus-per-node=1"],
    "--gpus-per-node typed": ["--gpus-per-node={type}:1"],
    "--gpus-per-task untyped": ["--gpus-per-task=1", "-n", "1"],
}


def _sbatch(slurm, *options: str, account: str, qos: str = "", env: dict | None = None):
    """Submit; returns (job id or "", everything sbatch said)."""
    args = ["sbatch", "--parsable", "-o", "/dev/null", "-A", account]
    if qos:
        args += ["-q", qos]
    done = subprocess.run(
        [*args, *options, "--wrap", "sleep 300"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin:/usr/sbin", "SLURM_CONF": slurm.conf, **(env or {})},
        cwd=slurm.workdir,
        timeout=60,
        check=False,
    )
    job = done.stdout.strip() if done.returncode == 0 else ""
    if job:
        slurm.jobs.append(job)
    return job, done.stderr


def _table(slurm) -> Path:
    return Path(slurm.conf).parent / TABLE_NAME


class Sampler:
    """Every second: the GPUs each account and QOS holds in running jobs (squeue)."""

    def __init__(self, slurm) -> None:
        self.slurm = slurm
        self.samples: list[dict[tuple[str, str], int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        while not self.stop.is_set():
            out = self.slurm.run(
                "squeue", "-h", "-t", "R", "-O", "Account:|,QOS:|,tres-alloc:|", check=False
            )
            held: dict[tuple[str, str], int] = defaultdict(int)
            for line in out.splitlines():
                account, qos, alloc = [*line.split("|"), "", "", ""][:3]
                for item in alloc.split(","):
                    key, _sep, value = item.partition("=")
                    if key.startswith("gres/gpu"):
                        held[(account, key)] += int(value)
                        held[(f"qos:{qos}", key)] += int(value)
            self.samples.append(dict(held))
            self.stop.wait(1.0)

    def __enter__(self) -> "Sampler":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def most(self, who: str, key: str = "gres/gpu") -> int:
        return max((sample.get((who, key), 0) for sample in self.samples), default=0)


@pytest.mark.django_db(transaction=True)
def test_the_plugin_rewrites_an_untyped_request_and_refuses_with_the_rule_quota_and_remedy(
    lab, slurm, delivery, settings
):
    rules.tier_update(tier=lab.regular, user=lab.ops, reason=REASON, data={"max_gpus_per_job": 2})
    alpha, _quota = lab.project("alpha", tier=lab.regular, guarantee=1, borrow=2)  # A100 max 3
    beta, _quota = lab.project("beta", borrow=2)
    rules.quota_create(
        user=lab.ops,
        reason=REASON,
        project=beta,
        pool=lab.pool,
        flavor=lab.h100,
        guarantee=0,
        borrow_limit=2,
        preemption_class=lab.allowed,
    )
    run = delivery.sync()
    status = delivery.status(run)
    assert status["installed"] and status["current"] and status["table_current"], status
    assert status["installed_version"] == plugin_version()
    account = lab.account(alpha)

    # Untyped, one GPU type allowed: rewritten to it, with a note naming the rule.
    job, said = _sbatch(slurm, "--gres=gpu:1", account=account, qos="regular")
    assert job, said
    assert "rewrote the untyped request gpu:1 to gpu:a100:1" in said
    assert "project alpha may use only a100 GPUs in pool lab" in said
    shown = slurm.run("scontrol", "show", "job", job)
    assert "TresPerNode=gres:gpu:a100:1" in shown
    job, said = _sbatch(slurm, "--gpus=2", account=account, qos="regular")
    assert "TresPerJob=gres:gpu:a100:2" in slurm.run("scontrol", "show", "job", job)

    # A type without quota: refused, naming the rule, the quota and what to submit instead.
    job, said = _sbatch(slurm, "--gres=gpu:h100:1", account=account, qos="regular")
    assert not job
    assert "rule: GPU quota per type" in said
    assert "its quota: a100=3 h100=0 total=3" in said
    assert "Submit --gres=gpu:a100:N instead" in said
    # The same in Chinese as well when the job's locale asks for it (sbatch passes it).
    job, said = _sbatch(
        slurm, "--gres=gpu:h100:1", account=account, qos="regular", env={"LANG": "zh_CN.UTF-8"}
    )
    assert not job
    assert "rule: GPU quota per type" in said
    assert "没有 h100 GPU 配额" in said

    # More than the project may ever hold, more than the tier's per-job cap.
    job, said = _sbatch(slurm, "--gres=gpu:a100:4", account=account, qos="exploratory")
    assert not job and "rule: project maximum" in said and "at most 3 a100 GPUs" in said
    job, said = _sbatch(slurm, "--gres=gpu:a100:3", account=account, qos="regular")
    assert not job and "rule: GPUs per job in QOS regular" in said
    # No -q: the association's DefaultQOS (the project's tier, capped per job) decides.
    job, said = _sbatch(slurm, "--gres=gpu:a100:3", account=account)
    assert not job and "QOS regular" in said

    # Two GPU types: an untyped request must name one.
    job, said = _sbatch(slurm, "--gres=gpu:1", account=lab.account(beta), qos="regular")
    assert not job
    assert "may use a100, h100 in pool lab" in said
    assert "e.g. --gres=gpu:a100:1" in said
    job, said = _sbatch(slurm, "--gres=gpu:h100:1", account=lab.account(beta), qos="regular")
    assert job, said

    # Jobs without GPUs, and accounts that are not Arbiter's, are none of its business.
    job, said = _sbatch(slurm, account=account, qos="regular")
    assert job, said
    job, said = _sbatch(slurm, "--gres=gpu:h100:1", account="root")
    assert job, said
    slurm.cancel_all()

    # Fails safe: an expired table, then a missing one, refuse governed GPU jobs.
    table = _table(slurm)
    data = table_data(state=lab.cluster.sync_state.applied_state, cluster_name="arbiter")
    table.write_text(table_text(data, expires=int(time.time()) - 1))
    job, said = _sbatch(slurm, "--gres=gpu:a100:1", account=account, qos="regular")
    assert not job and "the rules table arbiter_submit_table.lua is expired" in said
    job, said = _sbatch(slurm, account=account, qos="regular")  # no GPUs: still fine
    assert job, said
    table.unlink()
    job, said = _sbatch(slurm, "--gres=gpu:a100:1", account=account, qos="regular")
    assert not job and "is missing" in said
    backend = services.backend_for(lab.cluster)
    if delivery.mode == "write":  # Arbiter reads the file beside slurm.conf
        status = services.submit_refresh(cluster=lab.cluster, backend=backend, write=False)
        assert status["installed"] and not status["table_current"]
    # The guard's minute renews it while the cluster is in sync (and the agent's next run
    # fetches it: the file it finds missing is no table it holds, so it gets a 200).
    delivery.guard()
    delivery.fetch()
    job, said = _sbatch(slurm, "--gres=gpu:a100:1", account=account, qos="regular")
    assert job, said
    services.submit_refresh(cluster=lab.cluster, backend=backend, write=False, recheck=False)
    lab.cluster.sync_state.refresh_from_db()
    assert lab.cluster.sync_state.submit_plugin["table_current"]


@pytest.mark.django_db(transaction=True)
def test_no_project_ever_runs_more_gpus_than_its_rules_allow_in_any_qos_or_request_form(
    lab, slurm, delivery
):
    rules.tier_update(tier=lab.key, user=lab.ops, reason=REASON, data={"max_gpus_total": 3})
    alpha, _quota = lab.project("alpha", tier=lab.key, guarantee=1, borrow=1)  # A100 max 2
    beta, _quota = lab.project("beta", tier=lab.key, borrow=4, flavor=lab.h100)  # H100 max 4
    delivery.sync()
    alpha_account, beta_account = lab.account(alpha), lab.account(beta)
    qos_of_alpha = ["key", "regular", "exploratory", "lab.alpha.guarantee", "lab.borrow"]
    unexpected = []
    with Sampler(slurm) as sampler:
        for qos in qos_of_alpha:
            for form, options in FORMS.items():
                for kind in ("a100", "h100"):
                    if "{type}" not in " ".join(options) and kind == "h100":
                        continue
                    job, said = _sbatch(
                        slurm,
                        *(o.replace("{type}", kind) for o in options),
                        account=alpha_account,
                        qos=qos,
                    )
                    refused = kind == "h100"
                    rewritten = "untyped" in form
                    if refused and (job or "no quota for h100" not in said):
                        unexpected.append((qos, form, kind, job, said))
                    if rewritten and (not job or "rewrote the untyped request" not in said):
                        unexpected.append((qos, form, kind, job, said))
            # Beta fills the H100s meanwhile, in the capped tier too.
            for _ in range(2):
                _sbatch(
                    slurm,
                    "--gres=gpu:1",
                    account=beta_account,
                    qos=qos
                    if qos in ("key", "regular", "exploratory", "lab.borrow")
                    else "regular",
                )
            time.sleep(6)  # a few scheduling passes while the sampler watches
            slurm.cancel_all()
    assert unexpected == []
    assert len(sampler.samples) >= 5 * 6
    # Alpha: at most its A100 maximum (2) at any moment, never an H100; beta: no A100.
    assert sampler.most(alpha_account) <= 2
    assert sampler.most(alpha_account) == 2  # the limit was reached, not just never tested
    assert sampler.most(alpha_account, "gres/gpu:h100") == 0
    assert sampler.most(beta_account, "gres/gpu:a100") == 0
    assert sampler.most(beta_account) <= 4
    # The capped tier and the guarantee QOS never past their caps.
    assert sampler.most("qos:key") <= 3
    assert sampler.most("qos:lab.alpha.guarantee") <= 1


def _slurmctld_log(slurm) -> str:
    log = Path(slurm.conf).parent.parent / "log" / "slurmctld.log"
    return log.read_text(errors="replace")


def test_the_plugin_is_silent_to_outsiders_says_empty_checks_the_whole_table_and_logs_updates(
    lab, slurm
):
    alpha, _quota = lab.project("alpha", borrow=2)  # A100 only; root is its member
    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    account = lab.account(alpha)

    # A user who is not a member hears nothing of the project: Slurm's association check
    # answers (no quota, no advice from Arbiter).
    job, said = _sbatch(slurm, "--uid=nobody", "--gres=gpu:h100:1", account=account)
    assert not job
    assert "Invalid account" in said and "Arbiter" not in said and "quota" not in said

    # A refused `scontrol update`: Slurm 22.05 shows its generic text; the plugin's reason
    # is in slurmctld's log with the job, the user and the rule.
    held, said = _sbatch(slurm, "-H", "--gres=gpu:a100:1", account=account, qos="regular")
    assert held, said
    done = subprocess.run(
        ["scontrol", "update", f"JobId={held}", "Gres=gpu:h100:1"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin:/usr/sbin", "SLURM_CONF": slurm.conf},
        check=False,
    )
    assert done.returncode != 0
    slurm.wait_for(
        "the refusal in slurmctld's log",
        lambda: f"arbiter: refused update of job {held} by user root" in _slurmctld_log(slurm),
    )
    line = next(
        x for x in _slurmctld_log(slurm).splitlines() if f"refused update of job {held}" in x
    )
    assert "no quota for h100 GPUs" in line

    # An empty table is "empty", not "missing".
    table = _table(slurm)
    good = table.read_text()
    table.write_text("")
    job, said = _sbatch(slurm, "--gres=gpu:a100:1", account=account, qos="regular")
    assert not job and "arbiter_submit_table.lua is empty" in said
    backend = services.backend_for(lab.cluster)
    status = services.submit_refresh(cluster=lab.cluster, backend=backend, write=False)
    assert status["table_problem"] == "empty" and not status["table_current"]

    # A damaged body under an intact first line: the plugin checks the whole table.
    first, _newline, body = good.partition("\n")
    table.write_text(f"{first}\n{body.replace('a100', 'a10x', 1)}")
    job, said = _sbatch(slurm, "--gres=gpu:a100:1", account=account, qos="regular")
    assert not job and "is damaged (its checksum does not match)" in said
    status = services.submit_refresh(cluster=lab.cluster, backend=backend, write=False)
    assert status["table_problem"] == "damaged" and not status["table_current"]
    assert status["table_fingerprint"] == status["wanted_fingerprint"]  # the first line is fine
    # The guard's minute writes it again, and governed GPU jobs are accepted.
    services.guard_check(cluster=lab.cluster)
    job, said = _sbatch(slurm, "--gres=gpu:a100:1", account=account, qos="regular")
    assert job, said
    slurm.cancel_all()
