"""End-to-end: ``docs/ci-pipelines.md`` as written, against the demo.

On the demo data (``seed_demo`` and ``seed_demo_approvals``, as ``make run`` loads them) and a
live server, the documented commands run as they are: the shell blocks of section 1 in bash
from the repository's folder (``.venv/bin/python manage.py token_create`` and ``curl``), the
GitLab job's script of section 2 in bash, twice (a retried job), and the GitHub Actions step
of section 3 in Python with its ``env`` as GitHub fills it in, twice (a re-run): each retry
answers the first request and files nothing new (no 409). Only what cannot run here is
replaced, and said so: ``sbatch`` and ``squeue`` are a small stand-in that keeps the jobs it
was given in a file (no Slurm needed; the Slurm sync tests use a real one), the pipelines'
minute between two polls is a fifth of a second, and the person who approves the queue jump
meanwhile is the test, through the approval service. The demo has no cluster until one is
added (README, "The demo against a local Slurm"), so the test adds the lab's cluster
``arbiter`` serving the training pool, as ops would.
"""

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from approvals import services as approval_services
from approvals.models import RequestKind, RequestStage, RequestState, UpgradeRequest
from governance.models import ApiToken, Pool, ServiceAccount, User
from queues import services as queue_services

pytestmark = pytest.mark.django_db(transaction=True)

DOC = settings.BASE_DIR / "docs" / "ci-pipelines.md"
# sbatch and squeue as far as the pipelines use them: jobs kept in $FAKE_SLURM_JOBS, one
# "id name submit-time" a line, ids from 4242; squeue prints "%i", "%V" or "%i %V" of the jobs
# named by --name= or --job=, with the submit time in $TZ (the stand-in knows UTC only).
FAKE_SLURM = """#!{python}
import datetime, os, sys
path = os.environ["FAKE_SLURM_JOBS"]
jobs = [line.split() for line in open(path)] if os.path.exists(path) else []
args = dict(arg.split("=", 1) for arg in sys.argv[1:] if arg.startswith("--") and "=" in arg)
if os.path.basename(sys.argv[0]) == "sbatch":
    job = str(4242 + len(jobs))
    at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    open(path, "a").write(f"{{job}} {{args['--job-name']}} {{at}}\\n")
    print(job)
else:
    assert os.environ.get("TZ") == "UTC" or args["--format"] == "%i", "times in UTC only"
    for job, name, at in jobs:
        if args.get("--name") in (None, name) and args.get("--job") in (None, job):
            print(args["--format"].replace("%i", job).replace("%V", at))
"""
# The pipelines poll every minute; here the minute is a fifth of a second.
BASH_SLEEP = "sleep() { command sleep 0.2; }\n"
PYTHON_SLEEP = "import time as _time\n_sleep = _time.sleep\n_time.sleep = lambda s: _sleep(0.2)\n"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def database_url() -> str:
    """The test database, for the ``manage.py`` the documented commands run."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgres://{db['USER']}@{db['HOST']}{port}/{db['NAME']}"


@pytest.fixture
def demo(tmp_path):
    call_command("seed_demo", verbosity=0)
    call_command("seed_demo_approvals", verbosity=0)
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=arbiter\n")
    queue_services.cluster_create(
        user=User.objects.get(username="ops"),
        reason="The lab cluster serves the training pool",
        name="arbiter",
        slurm_cluster="arbiter",
        slurm_conf=str(conf),
        pools=[Pool.objects.get(slug="training")],
    )


@pytest.fixture
def shell_env(live_server, tmp_path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "squeue"):
        (bin_dir / name).write_text(FAKE_SLURM.format(python=sys.executable))
        (bin_dir / name).chmod(0o755)
    venv = str(Path(sys.executable).parent)
    return {
        **os.environ,
        # No virtualenv on the PATH: the documented commands name ``.venv/bin/python``.
        "PATH": ":".join(
            [str(bin_dir), *(p for p in os.environ["PATH"].split(":") if p and p != venv)]
        ),
        "DATABASE_URL": database_url(),
        "ARBITER": live_server.url,
        "FAKE_SLURM_JOBS": str(tmp_path / "slurm-jobs"),
    }


GITHUB_CONTEXT = {
    "secrets.ARBITER_TOKEN": "",  # filled in by the test
    "github.server_url": "https://github.com",
    "github.repository": "example/vision",
    "github.run_id": "7",
}


def github_env(step_env: dict[str, str], token: str) -> dict[str, str]:
    """The step's ``env`` as GitHub fills in its expressions (every one must be known)."""
    context = {**GITHUB_CONTEXT, "secrets.ARBITER_TOKEN": token}

    def value(match: re.Match[str]) -> str:
        return context[match.group(1)]

    return {
        name: re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", value, str(text))
        for name, text in step_env.items()
    }


def run_bash(script: str, env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def section_one(env: dict[str, str]) -> str:
    """Run section 1's two shell blocks; answer the pipeline's token (``ARBITER_TOKEN``)."""
    api, server = blocks("sh")[:2]
    api = api.replace("ARBITER=http://127.0.0.1:8000", f"ARBITER={env['ARBITER']}")
    out = run_bash(api + 'echo "$ARBITER_TOKEN"', env, settings.BASE_DIR).strip().splitlines()
    assert out[0].startswith("token ") and out[0].endswith(" approved by ops"), out
    token = out[-1]
    account = ServiceAccount.objects.get(user__username="vision-ci")
    assert account.project is not None and account.project.slug == "vision"
    assert ApiToken.objects.filter(user=account.user, name="release pipeline").count() == 1
    run_bash(server, env, settings.BASE_DIR)  # the account's second token, the lead's own
    assert ApiToken.objects.filter(user=account.user, name="release pipeline").count() == 2
    assert ApiToken.objects.filter(user__username="lead").count() == 2
    return token


def approve_when_filed(started: float, stop: threading.Event) -> None:
    """Approve the pipeline's queue jump once it is filed, as its approvers would."""
    while not stop.is_set():
        request = UpgradeRequest.objects.filter(
            kind=RequestKind.QUEUE_JUMP,
            requester__username="vision-ci",
            stage=RequestStage.SUBMITTED,
        ).first()
        if request is None:
            time.sleep(0.1)
            continue
        for username in [getattr(request.owner_approver, "username", "ops"), "ops", "ops2"]:
            request.refresh_from_db()
            if request.stage != RequestStage.SUBMITTED:
                break
            if request.approvals.filter(approver__username=username).exists():
                continue
            approval_services.request_approve(
                request=request, user=User.objects.get(username=username), comment="Go ahead"
            )
        if time.monotonic() - started > 60:
            return


def run_with_approvals(command: list[str], env: dict[str, str], cwd: Path) -> str:
    stop = threading.Event()
    errors: list[BaseException] = []

    def approve() -> None:
        try:
            approve_when_filed(time.monotonic(), stop)
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)
            stop.set()
        finally:
            connection.close()

    approver = threading.Thread(target=approve)
    approver.start()
    try:
        done = subprocess.run(
            command, env=env, cwd=cwd, capture_output=True, text=True, timeout=120
        )
    finally:
        stop.set()
        approver.join()
    assert not errors, errors
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def test_the_documented_commands_run_against_the_demo(demo, shell_env, tmp_path):
    token = section_one(shell_env)
    env = {**shell_env, "ARBITER_TOKEN": token}

    # Section 2: the GitLab job's script, with GitLab's variables.
    (gitlab,) = [block for block in blocks("yaml") if block.startswith("train:")]
    job = yaml.safe_load(gitlab)["train"]
    gitlab_env = {
        **env,
        **{name: str(value) for name, value in job["variables"].items()},
        "ARBITER": env["ARBITER"],
        "CI_PIPELINE_ID": "1001",
        "CI_JOB_NAME": "train",
        "CI_JOB_URL": "https://gitlab.example.org/vision/-/jobs/1",
        "CI_COMMIT_SHORT_SHA": "abc1234",
    }
    script = BASH_SLEEP + "\n".join(job["script"])
    out = run_with_approvals(["bash", "-eo", "pipefail", "-c", script], gitlab_env, tmp_path)
    assert "approved" in out or "active" in out, out
    first = UpgradeRequest.objects.get(requester__username="vision-ci")
    grants = json.loads(out[out.index('{"count"') :])  # the job's last call: the grants in force
    assert [grant["request"] for grant in grants["results"]] == [first.pk]
    assert first.job_ids == ["4242"]
    assert first.state in (RequestState.APPROVED, RequestState.ACTIVE)
    # The job retried (same pipeline, same job name): the same key and body, no second
    # request, no 409 (curl -f would fail the script), no second Slurm job.
    again = run_bash(script, gitlab_env, tmp_path)
    assert re.search(rf"^request {first.pk}: (approved|active)$", again, re.M), again
    assert UpgradeRequest.objects.filter(requester__username="vision-ci").count() == 1
    assert "/api/v1/requests//" not in again
    assert len((tmp_path / "slurm-jobs").read_text().splitlines()) == 1

    # Section 3: the GitHub Actions step, in Python.
    (github,) = [block for block in blocks("yaml") if block.startswith("- name:")]
    step = yaml.safe_load(github)[0]
    step_env = {
        **env,
        **github_env(step["env"], token),
        "ARBITER": env["ARBITER"],  # the demo's address, not the example's
        "GITHUB_RUN_ID": "7",  # set by GitHub in every step
        "GITHUB_RUN_ATTEMPT": "1",
    }
    assert step_env["IDEMPOTENCY_KEY"] == "github-7-train"
    command = [sys.executable, "-c", PYTHON_SLEEP + step["run"]]
    out = run_with_approvals(command, step_env, tmp_path)
    assert "approved" in out or "active" in out, out
    second = UpgradeRequest.objects.filter(requester__username="vision-ci").exclude(pk=first.pk)
    assert [request.stage for request in second] == [RequestStage.APPROVED]
    printed = json.loads(out[out.index("[") :])  # the step's last print: the grants in force
    assert sorted(grant["request"] for grant in printed) == [first.pk, second[0].pk]

    # The step re-run (a new attempt of the same run): the same key and body, nothing new.
    done = subprocess.run(
        command,
        env={**step_env, "GITHUB_RUN_ATTEMPT": "2"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert re.search(rf"^request {second[0].pk} (approved|active)$", done.stdout, re.M)
    assert UpgradeRequest.objects.filter(requester__username="vision-ci").count() == 2
    assert len((tmp_path / "slurm-jobs").read_text().splitlines()) == 2
