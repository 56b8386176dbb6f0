"""Cluster pages and API: ops only, no 500 without Slurm, configuration through changes."""

import pytest
from django.urls import reverse

from queues import services
from queues.models import SyncRun, SyncStatus, SyncTrigger
from tests.conftest import REASON, login

pytestmark = pytest.mark.django_db

UNREACHABLE = "/nonexistent/arbiter-test/bin"


@pytest.fixture
def cluster(ops, world, settings):
    settings.ARBITER_SLURM_BIN_DIRS = [UNREACHABLE]
    return services.cluster_create(
        user=ops,
        reason=REASON,
        name="down",
        slurm_cluster="arbiter",
        slurm_bin_dir=UNREACHABLE,
        pools=[world.training],
    )


def test_the_cluster_page_says_it_cannot_reach_slurm_after_a_check(cluster, ops):
    page = login(ops).get(reverse("cluster_detail", args=["down"])).content.decode()
    assert "Not checked yet." in page
    services.cluster_check(cluster=cluster)
    response = login(ops).get(reverse("cluster_detail", args=["down"]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Cannot reach the scheduler." in page
    assert "Cannot run /nonexistent/arbiter-test/bin/sacctmgr" in page
    assert "sync due" in page
    assert "PriorityWeightAge=" in page  # the world's exploratory tier ages


@pytest.mark.parametrize("persona", ["member", "approver", "lead"])
def test_only_ops_see_clusters(cluster, persona, request):
    client = login(request.getfixturevalue(persona))
    assert client.get(reverse("cluster_list")).status_code == 403
    assert client.get(reverse("cluster_detail", args=["down"])).status_code == 403
    assert client.post(reverse("cluster_sync", args=["down"])).status_code == 403
    assert client.get(reverse("api_cluster_detail", args=["down"])).status_code == 403


def test_the_cluster_list_has_a_fixed_number_of_queries(
    cluster, ops, world, django_assert_num_queries
):
    services.cluster_create(user=ops, reason=REASON, name="two", slurm_cluster="b")
    client = login(ops)
    client.get(reverse("cluster_list"))  # warm the session
    with django_assert_num_queries(5):
        response = client.get(reverse("cluster_list"))
    assert response.status_code == 200
    assert "down" in response.content.decode()
    assert "two" in response.content.decode()


def test_dry_run_from_the_page_records_a_failed_run_with_the_reason(cluster, ops):
    response = login(ops).post(reverse("cluster_sync", args=["down"]), {"dry_run": "on"})
    run = SyncRun.objects.get()
    assert response.status_code == 302
    assert response.url == reverse("sync_run_detail", args=["down", run.pk])
    assert (run.trigger, run.status) == (SyncTrigger.DRY_RUN, SyncStatus.FAILED)
    page = login(ops).get(response.url).content.decode()
    assert "Cannot run /nonexistent/arbiter-test/bin/sacctmgr" in page


def test_sync_now_from_the_api_is_queued(cluster, ops, api_client, monkeypatch):
    from queues import tasks

    sent = []
    monkeypatch.setattr(tasks.sync_cluster, "delay", lambda run_id: sent.append(run_id))
    api_client.force_authenticate(ops)
    response = api_client.post(reverse("api_cluster_sync", args=["down"]), {})
    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    assert response.json()["trigger"] == "manual"
    detail = api_client.get(reverse("api_cluster_detail", args=["down"])).json()
    assert detail["reachable"] is None  # never checked: reading runs nothing
    services.cluster_check(cluster=cluster)
    detail = api_client.get(reverse("api_cluster_detail", args=["down"])).json()
    assert detail["reachable"] is False
    assert "Cannot run" in detail["error"]
    assert detail["sync_due"] is True
    assert [run["id"] for run in detail["runs"]] == [response.json()["id"]]
    assert (
        api_client.post(
            reverse("api_cluster_sync", args=["down"]), {"dry_run": "maybe"}
        ).status_code
        == 400
    )
    assert api_client.get(reverse("api_cluster_detail", args=["nope"])).status_code == 404
