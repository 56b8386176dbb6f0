"""The pull agent as a controller host runs it: the real script
(deploy/slurm-agent/arbiter-table-agent) in a subprocess, with a token bound to its cluster."""

import os
import subprocess
from pathlib import Path

from django.conf import settings

from governance.models import User
from queues import services
from queues.models import Cluster

AGENT = Path(settings.BASE_DIR) / "deploy" / "slurm-agent" / "arbiter-table-agent"


def agent_token(cluster: Cluster, user: User) -> str:
    """An ``Authorization`` value with a new sync token of ``user`` bound to ``cluster``."""
    token = services.cluster_agent_token_create(cluster=cluster, user=user)
    return f"Bearer {token.key}"  # type: ignore[attr-defined]  # shown once, never stored


def run_agent(
    url: str, cluster: Cluster, directory: Path, token: str, token_file: Path | None = None
) -> subprocess.CompletedProcess:
    """One run of the agent (as its systemd service would), writing into ``directory``."""
    token_file = token_file or directory.parent / f"agent-{cluster.name}.token"
    token_file.write_text(token.removeprefix("Bearer ") + "\n")
    token_file.chmod(0o600)
    return subprocess.run(
        ["sh", str(AGENT)],
        env={
            "PATH": os.environ["PATH"],
            "ARBITER_URL": url,
            "ARBITER_CLUSTER": cluster.name,
            "ARBITER_TOKEN_FILE": str(token_file),
            "ARBITER_TABLE_DIR": str(directory),
            "ARBITER_TIMEOUT": "20",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
