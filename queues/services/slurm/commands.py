"""Running Slurm's client commands (sacctmgr, squeue, scontrol) for one cluster."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.conf import settings
from django.utils.translation import gettext as _

from ..backends import SchedulerError, SchedulerUnavailable

# ``scontrol update`` reports each job it could not change on a line of its own.
JOB_FAILURE = re.compile(r"^(?P<error>.+?) for job (?P<job>\S+)\s*$", re.MULTILINE)
NO_SUCH_JOBS = re.compile(r"Invalid job id specified")

# Signs in sacctmgr/scontrol output that the daemons did not answer (retry later).
UNAVAILABLE = re.compile(
    r"Connection refused|Problem talking to the database|Unable to contact slurm controller"
    r"|persistent connection|Socket timed out|Zero Bytes were transmitted|Munge (en|de)code"
    r"|Connection timed out|No route to host|Could not establish a connection",
    re.IGNORECASE,
)


@dataclass
class SlurmCommands:
    """Runs Slurm's client commands for one cluster and counts them."""

    slurm_conf: str = ""
    prefix: str = ""
    timeout: float = 60.0
    calls: int = 0
    writes: int = 0
    log: list[list[str]] = field(default_factory=list)

    def run(
        self,
        args: list[str],
        *,
        write: bool = False,
        stdin: str | None = None,
        tolerate: re.Pattern[str] | None = None,
    ) -> str:
        """Run one command; a failure whose output matches ``tolerate`` returns the output."""
        command = [*shlex.split(self.prefix), *args]
        env = dict(os.environ)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        self.calls += 1
        self.writes += int(write)
        self.log.append(args)
        try:
            done = subprocess.run(
                command,
                input=stdin,
                capture_output=True,
                text=True,
                env=env,
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError as error:
            raise SchedulerUnavailable(
                _("Cannot run %(command)s: %(error)s")
                % {"command": command[0], "error": error.strerror}
            ) from error
        except subprocess.TimeoutExpired as error:
            raise SchedulerUnavailable(
                _("%(command)s did not answer within %(seconds)d s")
                % {"command": " ".join(args[:3]), "seconds": self.timeout}
            ) from error
        output = (done.stdout or "") + (done.stderr or "")
        deleting = args[:3] == ["sacctmgr", "-i", "delete"]
        if done.returncode != 0 and deleting and "Nothing deleted" in output:
            return done.stdout  # already gone: deleting is idempotent
        tolerated = tolerate is not None and tolerate.search(output)
        if done.returncode != 0 and tolerated and not UNAVAILABLE.search(output):
            return output
        if done.returncode != 0:
            message = _("%(command)s failed (exit %(code)d): %(output)s") % {
                "command": " ".join(args[:4]),
                "code": done.returncode,
                "output": output.strip()[-600:] or _("no output"),
            }
            if UNAVAILABLE.search(output):
                raise SchedulerUnavailable(message)
            raise SchedulerError(message)
        if UNAVAILABLE.search(done.stderr or ""):
            raise SchedulerUnavailable(done.stderr.strip()[-600:])
        return done.stdout

    def sacctmgr_read(self, *args: str) -> list[list[str]]:
        out = self.run(["sacctmgr", "-n", "-P", *args])
        return [line.split("|") for line in out.splitlines() if line.strip()]

    def sacctmgr_write(self, *args: str, stdin: str | None = None) -> str:
        return self.run(["sacctmgr", "-i", *args], write=True, stdin=stdin)

    def squeue_jobs(self, ids: Iterable[str]) -> list[list[str]]:
        """Id, state, QOS, account and user of the given jobs (unknown ones are left out)."""
        out = self.run(
            ["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%i|%T|%q|%a|%u"],
            tolerate=NO_SUCH_JOBS,
        )
        if NO_SUCH_JOBS.search(out):
            return []
        return [line.split("|") for line in out.splitlines() if line.count("|") == 4]

    def move_jobs(self, ids: list[str], qos: str) -> dict[str, str]:
        """``scontrol update`` the jobs' QOS; returns the jobs it could not move, and why."""
        out = self.run(
            ["scontrol", "update", f"JobId={','.join(ids)}", f"QOS={qos}"],
            write=True,
            tolerate=JOB_FAILURE,
        )
        return {match["job"]: match["error"] for match in JOB_FAILURE.finditer(out)}


def backend_timeout() -> float:
    return float(getattr(settings, "ARBITER_SLURM_TIMEOUT", 60))
