"""Reading a cluster runs nothing: the page and the API show the last stored check with its
age; "Check now" queues a worker task (after commit) that refreshes it. Query counts are
flat in the number of clusters, pools and projects."""

import stat
from html import unescape
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import translation

from governance import services as rules
from queues import services, tasks
from queues.models import ClusterSyncState
from tests.conftest import REASON, login

pytestmark = pytest.mark.django_db

# A stand-in for Slurm's sacctmgr (no Slurm runs for these tests): it records each call
# in a marker file, then answers --version and "show tres" as Slurm 22.05 does.
FAKE_SACCTMGR = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/called"
if [ "$1" = "--version" ]; then echo "slurm 22.05.8"; exit 0; fi
printf 'cpu|\\nmem|\\ngres|gpu\\ngres|gpu:h100\\n'
"""


@pytest.fixture
def bin_dir(tmp_path, settings) -> Path:
    for name in ("sacctmgr", "squeue", "scontrol"):
        path = tmp_path / name
        path.write_text(FAKE_SACCTMGR)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    settings.ARBITER_SLURM_BIN_DIRS = [str(tmp_path)]
    return tmp_path


@pytest.fixture
def cluster(ops, world, bin_dir):
    return services.cluster_create(
        user=ops,
        reason=REASON,
        name="lab",
        slurm_cluster="arbiter",
        slurm_bin_dir=str(bin_dir),
        pools=[world.training],
    )


def test_a_get_of_a_cluster_runs_nothing(cluster, ops, bin_dir, api_client):
    client = login(ops)
    assert client.get(reverse("cluster_list")).status_code == 200
    assert client.get(reverse("cluster_detail", args=["lab"])).status_code == 200
    api_client.force_authenticate(ops)
    assert api_client.get(reverse("api_cluster_list")).status_code == 200
    assert api_client.get(reverse("api_cluster_detail", args=["lab"])).status_code == 200
    assert not (bin_dir / "called").exists()


def test_check_now_is_queued_after_commit_and_the_task_stores_the_result(
    cluster, ops, bin_dir, monkeypatch, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setattr(tasks.check_cluster, "delay", lambda cluster_id: sent.append(cluster_id))
    client = login(ops)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("cluster_check", args=["lab"]))
    assert response.status_code == 302
    assert sent == [cluster.pk]
    assert not (bin_dir / "called").exists()  # the page only queued it
    # A second click before the worker ran is the same check.
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("cluster_check", args=["lab"]))
    assert sent == [cluster.pk]
    assert client.get(reverse("cluster_check", args=["lab"])).status_code == 405

    # The worker runs it (twice is harmless: each run stores a fresh check).
    assert tasks.check_cluster(cluster.pk) is True
    assert tasks.check_cluster(cluster.pk) is True
    state = ClusterSyncState.objects.get(cluster=cluster)
    assert state.check_ok is True and state.check_error == ""
    assert state.scheduler_version == "slurm 22.05.8"
    assert state.tracked_resources == ["cpu", "gres/gpu", "gres/gpu:h100", "mem"]
    assert (bin_dir / "called").read_text().splitlines()[0] == "--version"
    page = client.get(reverse("cluster_detail", args=["lab"])).content.decode()
    assert "slurm 22.05.8" in page
    assert "gres/gpu:h100" in page
    assert " ago)" in page
    assert tasks.check_cluster(10**9) is None  # a deleted cluster is skipped


def test_check_now_through_the_api(cluster, ops, member, api_client, monkeypatch):
    monkeypatch.setattr(tasks.check_cluster, "delay", lambda cluster_id: None)
    api_client.force_authenticate(member)
    assert api_client.post(reverse("api_cluster_check", args=["lab"])).status_code == 403
    api_client.force_authenticate(ops)
    response = api_client.post(reverse("api_cluster_check", args=["lab"]))
    assert response.status_code == 202
    assert response.json() == {"queued": True}


def _grow(ops, world, n: int) -> None:
    """``n`` more projects with quotas in the served pool, and ``n`` more clusters."""
    for i in range(n):
        rules.project_create(user=ops, reason=REASON, slug=f"extra{i}", name=f"Extra {i}")
        services.cluster_create(
            user=ops, reason=REASON, name=f"extra{i}", slurm_cluster="b", pools=[world.training]
        )


def _count(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


@pytest.mark.parametrize(
    "url",
    [
        reverse("cluster_list"),
        reverse("cluster_detail", args=["lab"]),
        reverse("api_cluster_list"),
        reverse("api_cluster_detail", args=["lab"]),
    ],
)
def test_cluster_pages_and_api_have_a_flat_query_count(cluster, ops, world, url):
    services.cluster_create(
        user=ops, reason=REASON, name="second", slurm_cluster="b", pools=[world.training]
    )
    client = login(ops)
    client.get(url)  # warm the session
    small = _count(client, url)
    _grow(ops, world, 18)
    assert _count(client, url) == small


def test_cluster_page_query_counts_are_pinned(
    cluster, ops, world, django_assert_num_queries, api_client
):
    client = login(ops)
    client.get(reverse("cluster_list"))
    with django_assert_num_queries(5):
        client.get(reverse("cluster_list"))
    # session, user, cluster, newest revision, sync state, applied revision, the revision
    # the rules became due at, tiers, pools, runs, the last successful run, open rule alerts
    with django_assert_num_queries(12):
        client.get(reverse("cluster_detail", args=["lab"]))
    api_client.force_authenticate(ops)
    with django_assert_num_queries(3):
        api_client.get(reverse("api_cluster_list"))
    with django_assert_num_queries(5):
        api_client.get(reverse("api_cluster_detail", args=["lab"]))


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ("en", "-q &lt;pool&gt;.&lt;project&gt;.guarantee"),
        ("zh-hans", "-q &lt;pool&gt;.&lt;project&gt;.guarantee"),
    ],
)
def test_submit_instructions_render_escaped(cluster, ops, language, expected):
    client = login(ops)
    with translation.override(language):
        page = client.get(
            reverse("cluster_detail", args=["lab"]), HTTP_ACCEPT_LANGUAGE=language
        ).content.decode()
    assert expected in page
    assert "-q <pool>" not in page
    assert "&lt;pool&gt;.borrow" in page
    if language == "zh-hans":
        assert "保障" in page


def test_a_kueue_cluster_is_checked_through_its_api_server_and_runs_no_slurm_command(
    ops, world, settings, tmp_path, bin_dir
):
    """A Kueue cluster gets the Kubernetes backend: its check asks its API server (none
    answers here: the message says so), and nothing of Slurm (no sacctmgr) runs for it."""
    settings.ARBITER_KUBE_CREDENTIALS_DIR = str(tmp_path)
    settings.ARBITER_KUBE_TIMEOUT = 2
    (tmp_path / "token").write_text("t")
    cluster = services.cluster_create(
        user=ops,
        reason=REASON,
        name="k8s",
        backend="kueue",
        kube_api_server="https://127.0.0.1:9",
        kube_credentials_file="token",
        pools=[world.training],
    )
    state = services.cluster_check(cluster=cluster)
    assert state.check_ok is False
    assert "does not answer" in state.check_error
    run = services.sync_now(cluster=cluster, user=ops, dry_run=True)
    assert run.status == "failed"
    assert not (bin_dir / "called").exists()


def test_removing_a_hand_made_object_needs_ops_a_reason_and_never_touches_arbiters_own(
    cluster, ops, member, bin_dir
):
    """The "Remove" button of a drift row: ops only, with a reason; Arbiter's own objects are
    refused ("Sync now" restores them). Removing a real hand-made object is in test_drift."""
    url = reverse("cluster_drift_remove", args=["lab"])
    post = {"kind": "qos", "name": "training.regular", "reason": "Left over from a test"}
    assert login(member).post(url, post).status_code == 403

    client = login(ops)
    page = client.post(url, {**post, "reason": ""}, follow=True)
    assert "This field is required." in page.content.decode()

    ClusterSyncState.objects.update_or_create(
        cluster=cluster, defaults={"applied_state": {"qos": {"training.regular": {}}}}
    )
    page = client.post(url, post, follow=True)
    assert "training.regular is Arbiter's own" in unescape(page.content.decode())
    assert not (bin_dir / "called").exists()
