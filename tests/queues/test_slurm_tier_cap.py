"""A tier's GPU cap holds across every QOS Arbiter compiles for it, on the real Slurm.

The tier *exploratory* (cap 2, preemptible by *production*) is compiled into three QOS:
``exploratory`` (allowed class), ``exploratory.cautious`` (a cautious class with a minimum
runtime) and ``exploratory-protected`` (a forbidden class). Jobs of all three run and wait
at once, in several request forms, while a sampler reads the running GPUs of the whole tier
every half second: never more than 2. The split follows the waiting jobs on each guard tick.
Run twice: the job_submit table written by the sync, then delivered by the pull agent only.
"""

import os
import subprocess
import threading
import time

import pytest

from governance import services as rules
from queues.schedulers.slurm.values import parse_tres
from tests.conftest import REASON

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slurm]

FAMILY = ("exploratory", "exploratory.cautious", "exploratory-protected")


class Sampler(threading.Thread):
    """The tier's running GPUs (and which of its QOS run) every half second."""

    def __init__(self, conf: str) -> None:
        super().__init__(daemon=True)
        self.conf = conf
        self.samples: list[tuple[int, frozenset[str]]] = []
        self.stop = threading.Event()

    def read(self) -> tuple[int, frozenset[str]]:
        out = subprocess.run(
            ["squeue", "-h", "-t", "R,CG,CF", "-q", ",".join(FAMILY), "-O", "QOS:|,tres-alloc:|"],
            capture_output=True,
            text=True,
            env={**os.environ, "SLURM_CONF": self.conf},
            timeout=30,
            check=True,
        ).stdout
        total, running = 0, set()
        for line in out.splitlines():
            qos, _sep, tres = line.partition("|")
            gpus = int(parse_tres(tres.strip().rstrip("|")).get("gres/gpu", "0"))
            total += gpus
            if gpus:
                running.add(qos.strip())
        return total, frozenset(running)

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append(self.read())
            time.sleep(0.5)


def _sbatch(slurm, account: str, qos: str, *options: str) -> str:
    job = slurm.run(
        "sbatch",
        "--parsable",
        "-o",
        "/dev/null",
        "-A",
        account,
        "-q",
        qos,
        *options,
        "--wrap",
        "sleep 300",
    ).strip()
    slurm.jobs.append(job)
    return job


def _shares(slurm) -> dict[str, int]:
    out = slurm.sacctmgr(
        "-n", "-P", "show", "qos", "where", f"name={','.join(FAMILY)}", "format=name,grptres"
    )
    return {
        name: int(parse_tres(tres).get("gres/gpu", "-1"))
        for name, tres in (line.split("|") for line in out.splitlines() if "|" in line)
    }


def test_two_classes_in_one_capped_tier_never_hold_more_than_the_cap(lab, slurm, delivery):
    kw = {"user": lab.ops, "reason": REASON}
    rules.tier_update(**kw, tier=lab.exploratory, data={"max_gpus_total": 2})
    cautious = rules.preemption_class_create(
        **kw,
        slug="cautious",
        name="Cautious",
        kind="cautious",
        business_impact="Slow to restart.",
        min_runtime_minutes=30,
    )
    sandbox, _q = lab.project("sandbox", tier=lab.exploratory, borrow=4)
    vision, _q = lab.project(
        "vision", tier=lab.exploratory, borrow=4, flavor=lab.h100, preemption_class=cautious
    )
    serving, _q = lab.project(
        "serving", tier=lab.exploratory, guarantee=1, borrow=0, preemption_class=lab.forbidden
    )
    delivery.sync()  # the table written by the sync, or (second run) by the pull agent only
    shares = _shares(slurm)
    assert set(shares) == set(FAMILY)
    assert sum(shares.values()) == 2, shares  # the cap, split (all of it in the tier's QOS)
    assert shares["exploratory"] == 2

    sampler = Sampler(slurm.conf)
    sampler.start()
    try:
        sand = [
            slurm.sbatch(account=lab.account(sandbox), qos="exploratory", gpus="a100:1"),
            _sbatch(slurm, lab.account(sandbox), "exploratory", "--gpus=a100:1"),
        ]
        slurm.wait_state(sand[0], "RUNNING")
        slurm.wait_state(sand[1], "RUNNING")
        # The cautious class asks in other forms: a job array with --gpus-per-node, and srun.
        _sbatch(
            slurm,
            lab.account(vision),
            "exploratory.cautious",
            "--array=0-1",
            "--gpus-per-node=h100:1",
        )
        srun = subprocess.Popen(
            [
                "srun",
                "-A",
                lab.account(vision),
                "-q",
                "exploratory.cautious",
                "--gpus=h100:1",
                "sleep",
                "300",
            ],
            env={**os.environ, "SLURM_CONF": slurm.conf},
            cwd=slurm.workdir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _sbatch(
            slurm,
            lab.account(serving),
            "exploratory-protected",
            "-n",
            "1",
            "--gpus-per-task=a100:1",
        )
        # Ticks: the split follows the waiting jobs; sandbox's jobs end one by one.
        for step in range(12):
            delivery.guard()
            if step == 2:
                slurm.run("scancel", sand[0])
            if step == 6:
                slurm.run("scancel", sand[1])
            time.sleep(2)
            assert sum(v for v in _shares(slurm).values()) <= 2
        assert any(len(qos) >= 2 for _total, qos in sampler.samples), sampler.samples[-5:]
        srun.terminate()
    finally:
        sampler.stop.set()
        sampler.join(timeout=10)
    peak = max(total for total, _qos in sampler.samples)
    both = [qos for total, qos in sampler.samples if len(qos) >= 2]
    print(f"samples={len(sampler.samples)} peak={peak} with-two-classes={len(both)}")
    assert peak == 2  # the cap is used…
    assert all(total <= 2 for total, _qos in sampler.samples)  # …and never passed
    assert {"exploratory", "exploratory.cautious"} <= set().union(*both)
