"""What Arbiter's job_submit plugin does with an expired table: the cluster's choice
(``Cluster.submit_table_lapse``), carried in the table itself.

The real plugin (queues/services/slurm/job_submit.lua) runs in Lua 5.1, the Lua that Debian's
Slurm links, with the few functions slurmctld gives it (``slurm.log_user``, ``log_info`` and
the return codes) defined by the driver below, and reads a table rendered by the sync's own
code. slurmctld itself runs the plugin in the Slurm tests (tests/queues/test_slurm_submit.py).
"""

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from django.utils import timezone

from queues import services
from queues.models import SubmitTableLapse
from queues.services.slurm.submit import PLUGIN_FILE, TABLE_NAME, table_data, table_text
from queues.services.sync import desired_state_for
from tests.conftest import REASON, require_service

DRIVER = """
slurm = {
    SUCCESS = 0, ERROR = -1, ESLURM_ACCOUNTING_POLICY = 2050,
    log_info = function(f, ...) io.stdout:write("info: " .. string.format(f, ...) .. "\\n") end,
    log_user = function(f, ...) io.stdout:write("user: " .. string.format(f, ...) .. "\\n") end,
}
dofile(arg[1])
local job = { account = arg[2], tres_per_job = arg[3], user_name = "alice" }
io.stdout:write("rc=" .. tostring(slurm_job_submit(job, {}, 1000)) .. "\\n")
"""


def _lua() -> str:
    found = shutil.which("lua5.1")
    require_service("Lua 5.1 (Debian's lua5.1)", found is not None, "lua5.1 not on PATH")
    return str(found)


def _submit(directory: Path, account: str, gres: str) -> tuple[int, str]:
    driver = directory / "driver.lua"
    driver.write_text(DRIVER)
    result = subprocess.run(
        [_lua(), str(driver), str(directory / "job_submit.lua"), account, gres],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    rc = int(result.stdout.rsplit("rc=", 1)[1])
    return rc, result.stdout


def _etc(tmp_path: Path, world, lapse: str, expires: int | None) -> tuple[Path, str]:
    """The plugin and a table rendered for a cluster that chose ``lapse``; the account of
    one of its projects."""
    cluster = services.cluster_create(
        user=world.ops,
        reason=REASON,
        name="hpc",
        slurm_cluster="hpc",
        submit_table_lapse=lapse,
        pools=[world.training],
    )
    state = desired_state_for(
        cluster=cluster, backend=services.backend_for(cluster), at=timezone.now()
    )
    data = table_data(state=state, cluster_name="hpc", on_expiry=lapse)
    etc = tmp_path / "etc"
    etc.mkdir()
    shutil.copy(PLUGIN_FILE, etc / "job_submit.lua")
    if expires is not None:
        (etc / TABLE_NAME).write_text(table_text(data, expires=expires))
    account = next(iter(data["accounts"]))
    return etc, account


@pytest.mark.django_db
def test_an_expired_table_refuses_governed_gpu_jobs_by_default(world, tmp_path):
    etc, account = _etc(tmp_path, world, SubmitTableLapse.REFUSE, int(time.time()) - 1)
    rc, said = _submit(etc, account, "gres:gpu:a100:1")
    assert rc != 0
    assert "arbiter_submit_table.lua is expired" in said and account in said
    # Jobs without GPUs are not its business.
    rc, said = _submit(etc, account, "")
    assert rc == 0, said


@pytest.mark.django_db
def test_an_expired_table_of_a_native_cluster_leaves_gpu_jobs_to_slurm_and_the_guard(
    world, tmp_path
):
    etc, account = _etc(tmp_path, world, SubmitTableLapse.NATIVE, int(time.time()) - 1)
    rc, said = _submit(etc, account, "gres:gpu:a100:1")
    assert rc == 0, said
    assert f"table expired, native limits only for a GPU job of {account}" in said


@pytest.mark.django_db
def test_a_missing_table_refuses_even_on_a_native_cluster(world, tmp_path):
    etc, account = _etc(tmp_path, world, SubmitTableLapse.NATIVE, None)
    rc, said = _submit(etc, account, "gres:gpu:a100:1")
    assert rc != 0 and "is missing" in said
