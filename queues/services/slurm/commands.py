"""Running Slurm's client commands (sacctmgr, squeue, scontrol) for one cluster.

No shell, ever: every command is an argument list run with ``shell=False``. The program is
one of Slurm's client binaries, taken from the cluster's binary directory (which must be in
the deployer's allow-list, ``ARBITER_SLURM_BIN_DIRS``) or from the worker's ``PATH``; the
cluster's settings are checked again here before anything runs, so a value that slipped past
the forms (or an allow-list that shrank since) runs nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _

from queues.schedulers.backends import SchedulerError, SchedulerUnavailable

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


# The programs the runner may start: Slurm's client commands, nothing else.
PROGRAMS = frozenset(
    {"sacct", "sacctmgr", "scontrol", "sdiag", "sinfo", "sprio", "squeue", "sshare", "sstat"}
)
TIMEOUT_MAX = 600.0


class UnsafeCommand(SchedulerError):
    """A command or a connection setting the runner refuses to use."""


def _check_text(value: str, what: str) -> None:
    if "\x00" in value or "\n" in value or "\r" in value:
        raise UnsafeCommand(
            _("%(what)s contains a NUL byte or a line break; nothing was run.") % {"what": what}
        )


def check_connection_settings(*, slurm_conf: str, bin_dir: str) -> None:
    """Refuse settings that are not plain absolute paths, or a directory not allowed."""
    from queues.models import slurm_bin_dirs

    for value, what in ((slurm_conf, "SLURM_CONF"), (bin_dir, _("binary directory"))):
        if not value:
            continue
        _check_text(value, str(what))
        if not os.path.isabs(value) or ".." in value.split("/"):
            raise UnsafeCommand(
                _("%(what)s must be an absolute path without “..”; nothing was run.")
                % {"what": what}
            )
    if bin_dir and os.path.normpath(bin_dir) not in slurm_bin_dirs():
        raise UnsafeCommand(
            _("The binary directory %(dir)s is not in ARBITER_SLURM_BIN_DIRS; nothing was run.")
            % {"dir": bin_dir}
        )


@dataclass
class SlurmCommands:
    """Runs Slurm's client commands for one cluster and counts them."""

    slurm_conf: str = ""
    bin_dir: str = ""
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
        command = self.argv(args)
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
                shell=False,
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

    def argv(self, args: list[str]) -> list[str]:
        """The argument list to run: a Slurm program (from the allowed directory) and its
        arguments, each checked; ``UnsafeCommand`` when anything is off."""
        if not args or args[0] not in PROGRAMS:
            raise UnsafeCommand(
                _("%(program)s is not a Slurm client command; nothing was run.")
                % {"program": (args or ["?"])[0]}
            )
        if not 0 < self.timeout <= TIMEOUT_MAX:
            raise UnsafeCommand(
                _("The command timeout must be between 1 and %(max)d seconds.")
                % {"max": TIMEOUT_MAX}
            )
        check_connection_settings(slurm_conf=self.slurm_conf, bin_dir=self.bin_dir)
        for arg in args:
            if not isinstance(arg, str) or "\x00" in arg:
                raise UnsafeCommand(_("A command argument contains a NUL byte; nothing was run."))
        program = os.path.join(self.bin_dir, args[0]) if self.bin_dir else args[0]
        return [program, *args[1:]]

    def version(self) -> str:
        """The Slurm version the client reports (``sacctmgr --version``: ``slurm 22.05.8``)."""
        return self.run(["sacctmgr", "--version"]).strip()

    def tracked_resources(self) -> list[str]:
        """The TRES the accounting database tracks (``cpu``, ``gres/gpu:h100``, ...)."""
        rows = self.sacctmgr_read("show", "tres", "format=type,name")
        return sorted(f"{kind}/{name}" if name else kind for kind, name, *_rest in rows)

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


def commands_for(cluster: Any) -> SlurmCommands:
    """The Slurm client of ``cluster``'s connection settings (its ``slurm.conf``, its allowed
    binary directory and its timeout): what the sync and the workload collector both run."""
    return SlurmCommands(
        slurm_conf=cluster.slurm_conf,
        bin_dir=cluster.slurm_bin_dir,
        timeout=cluster.command_timeout or backend_timeout(),
    )
