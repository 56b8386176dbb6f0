"""Run a seeded mixed workload (``queues.replay.mixes``) on the lab's Slurm, and replay it.

Used by ``bench/replay_fidelity.py`` and ``tests/queues/test_replay_fidelity.py``. No Django:
the lab is driven with Slurm's own commands. ``SlurmLab.setup`` makes one QOS per tier
(``fid-<tier>``, its ``Priority`` the tier's), an account per project under ``fid``
(``fid_<project>``: no dot, so Arbiter's job_submit plugin does not take it for one of its
own; ``Organization=fidelity``) and root's associations; ``teardown`` removes them. Jobs sleep
for their run (``sbatch --wrap 'sleep N'``) with typed GPUs (``--gres=gpu:<type>:<n>``).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from queues.replay import Job, QuotaRule, Rules, TierRule
from queues.replay.mixes import LabJob
from queues.replay.slurm_conf import SlurmSettings

PREFIX = "fid"
PRIORITIES = {"key": 700, "regular": 400, "exploratory": 100}
FLAVORS = {"a100": "lab/a100", "h100": "lab/h100"}


def lab_conf(root: Path) -> str:
    if os.environ.get("SLURM_CONF"):
        return os.environ["SLURM_CONF"]
    env = root / "var" / "slurm" / "env"
    if env.exists():
        for line in env.read_text().splitlines():
            key, _sep, value = line.partition("=")
            if key == "SLURM_CONF":
                return value.strip()
    return ""


def _when(text: str, field: str) -> float:
    found = re.search(rf"\b{field}=(\S+)", text)
    if not found or found.group(1) in {"Unknown", "None"}:
        return float("nan")
    return datetime.fromisoformat(found.group(1)).timestamp()


@dataclass
class Ran:
    job: LabJob
    slurm_id: str
    submit: float
    start: float
    end: float
    # ``main`` or ``backfill`` (which of Slurm's schedulers started the job) and whether the
    # times are slurmctld's log's (milliseconds) rather than its whole-second stamps.
    started_by: str = ""
    precise: bool = False
    # Kueue (``bench/fidelity_kueue.py``): the admission's whole-second stamp and when the
    # driver first saw it (``start`` is then the estimate between them).
    stamp: float | None = None
    seen: float | None = None
    # Kueue, when it preempted the job: the estimate of its last admission, and how often.
    last: float | None = None
    preempted: int = 0

    @property
    def delay(self) -> float:
        return self.start - self.submit


@dataclass
class SlurmLab:
    conf: str

    def run(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            env={**os.environ, "SLURM_CONF": self.conf},
            cwd="/tmp",
            timeout=60,
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def answers(self) -> bool:
        try:
            return "UP" in self.run("scontrol", "ping", check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False

    def setup(self, priorities: Mapping[str, int] = PRIORITIES) -> None:
        self.teardown()
        self.wait_quiet()
        sacct = ("sacctmgr", "-i")
        for tier, value in priorities.items():
            self.run(*sacct, "add", "qos", f"{PREFIX}-{tier}", f"Priority={value}")
        self.run(*sacct, "add", "account", PREFIX, "Organization=fidelity")
        qos = ",".join(f"{PREFIX}-{tier}" for tier in priorities)
        for tier in priorities:
            account = f"{PREFIX}_p-{tier}"
            self.run(*sacct, "add", "account", account, f"Parent={PREFIX}", "Organization=fidelity")
            self.run(*sacct, "add", "user", "root", f"Account={account}", f"QOS={qos}")

    def teardown(self) -> None:
        self.run("scancel", "--full", "-u", "root", check=False)
        self._wait(lambda: not self.run("squeue", "-h", "-o", "%i", check=False).strip(), 60)
        rows = self.run("sacctmgr", "-n", "-P", "show", "account", "format=account,organization")
        ours = [r.split("|")[0] for r in rows.splitlines() if r.endswith("|fidelity")]
        children = [name for name in ours if "_" in name]
        for names in (children, [name for name in ours if "_" not in name]):
            if names:
                self.run("sacctmgr", "-i", "delete", "account", "where", f"name={','.join(names)}")
        rows = self.run("sacctmgr", "-n", "-P", "show", "qos", "format=name")
        qos = [name for name in rows.split() if name.startswith(f"{PREFIX}-")]
        if qos:
            self.run("sacctmgr", "-i", "delete", "qos", "where", f"name={','.join(qos)}")

    def wait_quiet(self, timeout: float = 60) -> None:
        """Wait until every node is idle and no reservation holds GPUs: a run on a node that
        another user's job, a drain or a reservation shares measures that, not the
        scheduler. Raises naming what is in the way."""

        def seen() -> str:
            nodes = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False).split("\n")
            busy = [line for line in nodes if line.strip() and not line.endswith(" idle")]
            reservations = self.run("scontrol", "show", "reservation", check=False)
            held = "ReservationName=" in reservations
            return "; ".join(busy + (["a reservation: " + reservations.strip()] if held else []))

        deadline = time.monotonic() + timeout
        while (why := seen()) and time.monotonic() < deadline:
            time.sleep(0.5)
        if why:
            raise RuntimeError(f"the Slurm lab is not quiet after {timeout:.0f} s: {why}")

    def backfilled(self) -> int:
        """Jobs Slurm's backfill scheduler has started since slurmctld started (``sdiag``)."""
        found = re.search(
            r"Total backfilled jobs \(since last slurm start\): (\d+)", self.run("sdiag")
        )
        return int(found.group(1)) if found else 0

    def qos_priorities(self) -> dict[str, float]:
        rows = self.run("sacctmgr", "-n", "-P", "show", "qos", "format=name,priority")
        out = {}
        for row in rows.splitlines():
            name, _sep, value = row.partition("|")
            out[name] = float(value or 0)
        return out

    def _wait(self, done: object, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():  # type: ignore[operator]
                return
            time.sleep(0.5)
        raise RuntimeError(f"timed out after {timeout:.0f} s")

    def _times(self, slurm_id: str) -> tuple[float, float, float]:
        """Submit, start and end of a job: slurmctld's, or the accounting's once slurmctld
        has forgotten it (``MinJobAge``, 300 s on the lab)."""
        shown = self.run("scontrol", "show", "job", slurm_id, check=False)
        if "SubmitTime=" in shown:
            return tuple(_when(shown, f) for f in ("SubmitTime", "StartTime", "EndTime"))  # type: ignore[return-value]
        row = self.run("sacct", "-X", "-n", "-P", "-j", slurm_id, "-o", "Submit,Start,End")
        submit, start, end = (row.strip().splitlines() or ["||"])[0].split("|")[:3]
        return _sacct_time(submit), _sacct_time(start), _sacct_time(end)

    def log_path(self) -> Path | None:
        """slurmctld's log (``SlurmctldLogFile`` in the lab's ``slurm.conf``), if it has one."""
        for line in Path(self.conf).read_text().splitlines():
            key, _sep, value = line.partition("=")
            if key.strip() == "SlurmctldLogFile" and value.strip():
                return Path(value.strip())
        return None

    def submit(self, workload: Sequence[LabJob]) -> list[Ran]:
        log = self.log_path()
        offset = log.stat().st_size if log is not None and log.exists() else 0
        began = time.monotonic()
        ids = []
        for job in workload:
            time.sleep(max(0.0, began + job.offset - time.monotonic()))
            options = ["--time", str(job.time_limit_minutes)] if job.time_limit_minutes else []
            ids.append(
                self.run(
                    "sbatch",
                    "--parsable",
                    "-o",
                    "/dev/null",
                    "-A",
                    f"{PREFIX}_{job.project}",
                    "-q",
                    f"{PREFIX}-{job.tier}",
                    f"--gres=gpu:{job.gpu_type}:{job.gpus}",
                    *options,
                    "--wrap",
                    f"sleep {job.seconds}",
                ).strip()
            )

        def ended() -> bool:
            # A failed squeue (slurmctld busy on a loaded machine) says nothing: ask again.
            # Taking its empty output for "all ended" once started the next seed while the
            # last one's jobs still queued.
            try:
                out = self.run("squeue", "-h", "-o", "%i").split()
            except (RuntimeError, subprocess.TimeoutExpired):
                return False
            return not set(out) & set(ids)

        self._wait(ended, 900)
        time.sleep(1.0)
        ran = []
        for slurm_id, job in zip(ids, workload, strict=True):
            ran.append(Ran(job, slurm_id, *self._times(slurm_id)))
        if log is not None and log.exists():
            with log.open("rb") as lines:
                lines.seek(offset)
                precise_times(ran, lines.read().decode(errors="replace"))
        return ran


_LOG = re.compile(
    r"^\[(?P<at>[0-9T:.-]+)\] (?:"
    r"_slurm_rpc_submit_batch_job: JobId=(?P<submit>\d+) "
    r"|sched: Allocate JobId=(?P<main>\d+) "
    r"|sched/backfill: _start_job: Started JobId=(?P<backfill>\d+) "
    r"|_job_complete: JobId=(?P<end>\d+) done)",
    re.M,
)


def precise_times(ran: Sequence[Ran], log: str) -> None:
    """Replace the whole-second stamps of ``ran`` by slurmctld's log times (milliseconds):
    the submission, the start (and which scheduler started it), the end. A job whose four
    lines are not all in ``log`` keeps its stamps."""
    seen: dict[str, dict[str, float | str]] = {}
    for found in _LOG.finditer(log):
        at = datetime.fromisoformat(found.group("at")).timestamp()
        for kind in ("submit", "main", "backfill", "end"):
            job = found.group(kind)
            if job is not None:
                row = seen.setdefault(job, {})
                if kind in ("main", "backfill"):
                    row.setdefault("start", at)
                    row.setdefault("by", kind)
                else:
                    row.setdefault(kind, at)
    for r in ran:
        row = seen.get(r.slurm_id, {})
        if {"submit", "start", "end"} <= set(row):
            r.submit, r.start, r.end = (float(row[k]) for k in ("submit", "start", "end"))
            r.started_by, r.precise = str(row["by"]), True


def _sacct_time(text: str) -> float:
    return (
        float("nan")
        if text in {"", "Unknown", "None"}
        else datetime.fromisoformat(text).timestamp()
    )


def replay_inputs(ran: Sequence[Ran]) -> list[Job]:
    """The jobs as Slurm saw them: its submit times, the runs they actually took. Whole-second
    stamps (no log) keep the order of jobs submitted within one second (a millisecond apart,
    by job id)."""
    return [
        Job(
            name=r.slurm_id,
            arrival=r.submit + (0.0 if r.precise else 0.001 * i),
            gpus=float(r.job.gpus),
            flavor=FLAVORS[r.job.gpu_type],
            duration=max(0.0, r.end - r.start),
            project=r.job.project,
            tier=r.job.tier,
            user="root",
            time_limit=(r.job.time_limit_minutes * 60.0 if r.job.time_limit_minutes else None),
        )
        for i, r in enumerate(ran)
    ]


def lab_rules(priorities: Mapping[str, int] = PRIORITIES) -> Rules:
    """The lab's rules as a replay reads them: a tier per QOS (score = priority / 10), a
    project per tier with no guarantee and no limit on either GPU type."""
    tiers = tuple(TierRule(slug=tier, score=value // 10) for tier, value in priorities.items())
    quotas = tuple(
        QuotaRule(project=f"p-{tier}", flavor=flavor, guarantee=0.0)
        for tier in priorities
        for flavor in FLAVORS.values()
    )
    return Rules(
        capacity=dict.fromkeys(FLAVORS.values(), 4.0),
        tiers=tiers,
        classes=(),
        quotas=quotas,
        project_tiers={f"p-{tier}": tier for tier in priorities},
    )


# Measured on the lab (slurmctld's log at debug2): slurmd answers the terminate request of an
# ended job ("already complete": the lab has no Epilog) 5–25 ms after its end, when slurmctld
# frees its GPUs; the model takes 50 ms (20 ms gives the same figures on seeds 1–40).
LAB_END_DELAY = 0.05


def model_settings(conf_text: str, priorities: Mapping[str, float], **kw: float) -> SlurmSettings:
    """The model's settings for the lab: its ``slurm.conf``, every QOS's priority (Slurm
    normalises the QOS factor by the highest one), the lab's end delay; ``kw`` overrides
    (``sched_phase``, ``bf_phase``: where in each second the passes run)."""
    kw.setdefault("end_delay", LAB_END_DELAY)
    return SlurmSettings.from_conf(conf_text, qos_priority=priorities, **kw)  # type: ignore[arg-type]


def lab_settings(lab: SlurmLab, **kw: float) -> SlurmSettings:
    """The model's settings for the running lab (its QOS priorities read back)."""
    qos = lab.qos_priorities()
    named = {tier: float(value) for tier, value in PRIORITIES.items()}
    named.update({f"qos:{name}": value for name, value in qos.items()})
    return model_settings(Path(lab.conf).read_text(), named, **kw)
