"""README, "A Slurm controller on another host": its two blocks, run as written where this
machine allows it.

- On Arbiter's host: ``manage.py agent_token_create`` for a Slurm cluster whose table is
  pulled (its table rendered as a sync renders it).
- On the controller host, in a scratch root (the block's absolute paths prefixed with it):
  the ``install`` and ``sed`` lines as written; ``systemd-analyze verify`` on the installed
  units; ``systemctl --root=... enable`` for the timer (what ``enable`` writes); and what the
  timer starts, the service's ``ExecStart`` with its ``EnvironmentFile``, against a live
  server. Not run: ``daemon-reload`` and ``--now``, which need a running systemd (none where
  the tests run), and the unit's sandboxing (``ProtectSystem`` and the rest).
"""

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from django.utils import timezone

from governance.models import User
from queues import services
from queues.models import ClusterSyncState, SubmitTableDelivery
from queues.services.sync import desired_state_for
from tests.conftest import REASON

SYSTEMCTL = "systemctl daemon-reload && systemctl enable --now arbiter-table-agent.timer"
UNITS = "/etc/systemd/system/"


def _pulled_cluster(ops: User) -> str:
    """Cluster "hpc" (Slurm, table pulled) with the table a sync would have rendered."""
    cluster = services.cluster_create(
        user=ops,
        reason=REASON,
        name="hpc",
        slurm_cluster="hpc",
        submit_table_delivery=SubmitTableDelivery.PULL,
    )
    backend = services.backend_for(cluster)
    applied = desired_state_for(cluster=cluster, backend=backend, at=timezone.now())
    ClusterSyncState.objects.update_or_create(
        cluster=cluster,
        defaults={"applied_state": applied, "applied_at": timezone.now()},
    )
    services.submit_refresh(cluster=cluster, backend=backend, write=True, recheck=False)
    return ClusterSyncState.objects.get(cluster=cluster).submit_table


def _unit(path: Path) -> dict[str, str]:
    return dict(
        line.split("=", 1)
        for line in path.read_text().splitlines()
        if "=" in line and line[0] != "#"
    )


def _env_file(path: Path) -> dict[str, str]:
    return dict(
        line.split("=", 1)
        for line in path.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )


def run_pull_agent_blocks(
    blocks: list[str], env: dict[str, str], tmp_path: Path, run: Callable[[str, dict], str]
) -> set[str]:
    """Run both blocks; returns their first lines (run)."""
    table = _pulled_cluster(User.objects.get(username="ops"))
    (token_block,) = [block for block in blocks if "agent_token_create" in block]
    (install,) = [block for block in blocks if block.startswith("install -m 0755 deploy/slurm")]
    token_file = tmp_path / "table-agent.token"
    run(token_block.replace("> table-agent.token", f"> {token_file}"), env)
    assert token_file.read_text().startswith("arb_")

    root = tmp_path / "root"
    for folder in ("usr/local/sbin", "etc/systemd/system", "etc/slurm"):
        (root / folder).mkdir(parents=True)
    script = install.replace(" table-agent.token ", f" {token_file} ")
    for path in ("/usr/local/sbin", UNITS.rstrip("/"), "/etc/arbiter"):
        script = script.replace(f" {path}", f" {root}{path}")
    assert SYSTEMCTL in script, "the README's last install line changed"
    script = script.replace("https://arbiter.example.com", env["ARBITER"])
    script = script.replace(SYSTEMCTL, f"systemctl --root={root} enable arbiter-table-agent.timer")
    run(script, env)
    assert (root / "etc/systemd/system/timers.target.wants/arbiter-table-agent.timer").is_symlink()
    assert oct((root / "etc/arbiter/table-agent.token").stat().st_mode & 0o777) == "0o600"

    # systemd's own check of the units, against the system's units copied into the root.
    if shutil.which("systemd-analyze") and Path("/usr/lib/systemd/system").is_dir():
        shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
        done = subprocess.run(
            ["systemd-analyze", "verify", f"--root={root}",
             f"{UNITS}arbiter-table-agent.service", f"{UNITS}arbiter-table-agent.timer"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        ours = [line for line in done.stderr.splitlines() if "arbiter-table-agent" in line]
        assert done.returncode == 0 and not ours, done.stderr

    # What the timer starts: the service's command line with its environment file (the
    # scratch root's token file and table directory instead of the host's).
    unit = _unit(root / "etc/systemd/system/arbiter-table-agent.service")
    env_file = root / unit["EnvironmentFile"].lstrip("/")
    with env_file.open("a") as out:
        out.write(f"ARBITER_TOKEN_FILE={root}/etc/arbiter/table-agent.token\n")
        out.write(f"ARBITER_TABLE_DIR={root}/etc/slurm\n")
    agent = subprocess.run(
        ["sh", str(root / unit["ExecStart"].lstrip("/"))],
        env={"PATH": os.environ["PATH"], **_env_file(env_file)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert agent.returncode == 0, agent.stderr
    assert (root / "etc/slurm/arbiter_submit_table.lua").read_text() == table
    return {block.splitlines()[0].split("  #")[0].strip() for block in (token_block, install)}
