"""The README's commands as written, against the demo and a live server.

Every code block and every inline ``.venv/bin/python manage.py`` command of README.md is
either run here (from the repository's folder, with no virtualenv on the PATH) or named in
``NOT_RUN_HERE`` with where it is run instead; a new block or command fails this test until
it is one or the other. ``docs/ci-pipelines.md`` has its own test
(``test_ci_pipelines_doc.py``), the walk-through too (``test_readme_walkthrough.py``).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from approvals.models import RequestKind, UpgradeRequest
from tests.governance.readme_agent import run_pull_agent_blocks
from tests.governance.test_ci_pipelines_doc import database_url

pytestmark = pytest.mark.django_db(transaction=True)

README = settings.BASE_DIR / "README.md"
# First line of a block, or an inline command: where it runs instead, and why not here.
NOT_RUN_HERE = {
    "make run": "the demo server itself; its loaders run in test_readme_walkthrough.py",
    "sudo deploy/slurm/up.sh": "as root with the Slurm lab (.ci/run); tests/queues slurm tests",
    "cp .env.example .env": (
        "needs Docker (none where the tests run); the same docker-compose.yml runs with podman "
        "in tests/governance/test_container_stack.py (marker containers)"
    ),
    ".venv/bin/python manage.py ...": "a placeholder for the commands below it",
    ".venv/bin/python manage.py sync_scheduler [--cluster NAME] [--dry-run]": (
        "needs a reachable cluster: tests/queues/test_sync_slurm.py (marker slurm)"
    ),
    ".venv/bin/python manage.py sync_scheduler --cluster NAME --export DIR": (
        "needs a Kueue cluster's settings: tests/queues/test_sync_kueue.py"
    ),
    # Running in production (issue 35 has these left to run in a test of their own).
    "bash deploy/containers/stack.sh build": (
        "builds images and runs the compose stack with podman (as root): every line of the block "
        "runs in tests/governance/test_container_stack.py (marker containers)"
    ),
    "kubectl create namespace arbiter": (
        "installs the Helm chart on a Kubernetes cluster: run as written against the lab's API "
        "server in tests/queues/test_helm_chart.py (marker k8s)"
    ),
    (
        "helm upgrade arbiter deploy/helm/arbiter --namespace arbiter --reuse-values "
        "--set image.tag=1.1"
    ): (
        "upgrades the Helm release: run as written against the lab's API server in "
        "tests/queues/test_helm_chart.py (marker k8s)"
    ),
    "DATABASE_URL=postgres://arbiter:secret@db:5432/arbiter bash deploy/backup.sh arbiter.dump": (
        "names a site's database; deploy/backup.sh and deploy/restore.sh run on PostgreSQL in "
        "tests/governance/test_upgrade_and_restore.py"
    ),
}
TOKEN_COMMAND = ".venv/bin/python manage.py token_create --user lead --scopes read,request"


def readme_blocks() -> list[str]:
    return re.findall(r"```(?:sh|bash)\n(.*?)```", README.read_text(), flags=re.DOTALL)


def inline_commands() -> list[str]:
    return re.findall(r"`(\.venv/bin/python manage\.py [^`]*)`", README.read_text())


def first_line(block: str) -> str:
    return block.splitlines()[0].split("  #")[0].strip()


@pytest.fixture
def env(live_server) -> dict[str, str]:
    venv = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": ":".join(p for p in os.environ["PATH"].split(":") if p and p != venv),
        "DATABASE_URL": database_url(),
        "CI_PIPELINE_URL": "https://gitlab.example.org/vision/-/pipelines/1",
        "ARBITER": live_server.url,
    }


def run(script: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script],
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def test_every_block_and_command_is_run_or_said_where(env, tmp_path):
    call_command("seed_demo", verbosity=0)
    call_command("seed_demo_approvals", verbosity=0)
    blocks = readme_blocks()
    ran: set[str] = set()

    # "API tokens": the command that prints the lead's token, then the two curl calls with it.
    assert TOKEN_COMMAND in inline_commands()
    token = run(TOKEN_COMMAND, env).strip()
    assert re.fullmatch(r"arb_\S+", token), token
    ran.add(TOKEN_COMMAND)
    (curl,) = [block for block in blocks if block.startswith("curl ")]
    out = run(curl.replace("arb_…", token).replace("http://127.0.0.1:8000", env["ARBITER"]), env)
    assert '"results"' in out and '"vision"' in out
    filed = UpgradeRequest.objects.get(kind=RequestKind.QUEUE_JUMP, job_ids=["48213"])
    assert filed.project.slug == "vision" and filed.requester.username == "lead"
    ran.add(first_line(curl))

    # The Slurm submit plugin, written where the block says (here: a temporary folder).
    (plugin,) = [block for block in blocks if "slurm_submit_plugin" in block]
    target = tmp_path / "job_submit.lua"
    run(plugin.replace("/etc/slurm/job_submit.lua", str(target)), env)
    assert "arbiter_submit_table.lua" in target.read_text()
    ran.add(first_line(plugin))

    # The sign-in settings: every variable the block sets is one .env.example documents.
    (oidc,) = [block for block in blocks if block.startswith("ARBITER_OIDC_ISSUER=")]
    example = (settings.BASE_DIR / ".env.example").read_text()
    for line in oidc.splitlines():
        name = line.split("=", 1)[0].strip()
        assert re.search(rf"^#?\s*{name}=", example, re.M), name
    ran.add(first_line(oidc))

    # A Slurm controller on another host: the agent's token, and the agent installed in a
    # scratch root (see readme_agent.py for what is not run: a running systemd).
    ran |= run_pull_agent_blocks(blocks, env, tmp_path, run)

    seen = {first_line(block) for block in blocks} | set(inline_commands())
    assert seen - ran - set(NOT_RUN_HERE) == set(), "run it here or say where it runs"
    assert set(NOT_RUN_HERE) <= seen, "NOT_RUN_HERE names what the README no longer has"
