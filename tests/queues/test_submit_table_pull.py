"""A Slurm controller with no file system in common with Arbiter: its job_submit table is
served by the API (``/api/v1/clusters/<name>/submit-table/``) and fetched by the pull agent
(deploy/slurm-agent/arbiter-table-agent, run here as the real script against a live server);
an expired table raises an alert whatever the cluster chose to do then.

The applied state is compiled from the rules (as a sync would apply it); the table is
rendered through the sync's own path (``submit_refresh``). That the plugin holds a pulled
table on a real slurmctld is shown by the Slurm tests.
"""

import hashlib
import time
from io import StringIO

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from governance import services as governance_services
from governance.models import TokenScope
from queues import services
from queues.models import (
    Alert,
    AlertKind,
    Cluster,
    ClusterSyncState,
    SubmitTableDelivery,
    SubmitTableLapse,
)
from queues.selectors.alerts import alert_text
from queues.services.slurm.submit import HEADER, plugin_source, plugin_version
from queues.services.sync import desired_state_for
from tests.conftest import REASON, login, token_for
from tests.queues.pull_agent import agent_token, run_agent


def _pulled_cluster(world, lapse: str = SubmitTableLapse.REFUSE, name: str = "hpc") -> Cluster:
    cluster = services.cluster_create(
        user=world.ops,
        reason=REASON,
        name=name,
        slurm_cluster=name,
        submit_table_delivery=SubmitTableDelivery.PULL,
        submit_table_lapse=lapse,
        pools=[world.training],
    )
    backend = services.backend_for(cluster)
    applied = desired_state_for(cluster=cluster, backend=backend, at=timezone.now())
    # As the last successful sync left it (it read JobSubmitPlugins=lua a moment ago).
    ClusterSyncState.objects.update_or_create(
        cluster=cluster,
        defaults={
            "applied_state": applied,
            "applied_at": timezone.now(),
            "submit_plugin": {"plugins": "lua"},
        },
    )
    services.submit_refresh(cluster=cluster, backend=backend, write=True, recheck=False)
    cluster.refresh_from_db()
    return cluster


def _url(cluster: Cluster) -> str:
    return f"/api/v1/clusters/{cluster.name}/submit-table/"


@pytest.mark.django_db
def test_the_api_serves_the_rendered_table_as_it_is_with_an_etag(world):
    cluster = _pulled_cluster(world)
    table = cluster.sync_state.submit_table
    header = HEADER.match(table)
    assert header and header.group(3).isdigit()
    assert "arbiter_submit_table" not in cluster.sync_state.submit_plugin.get("error", "")

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=agent_token(cluster, world.ops))
    response = client.get(
        _url(cluster), HTTP_X_ARBITER_AGENT_HOST="ctl1", HTTP_X_ARBITER_PLUGIN_VERSION="v (abc)"
    )
    assert response.status_code == 200
    assert response.content == table.encode()
    assert response["Content-Type"].startswith("text/x-lua")
    etag = response["ETag"]
    assert etag == '"' + hashlib.sha256(table.encode()).hexdigest() + '"'

    again = client.get(_url(cluster), HTTP_IF_NONE_MATCH=etag, HTTP_X_ARBITER_AGENT_HOST="ctl1")
    assert again.status_code == 304 and again.content == b""
    state = ClusterSyncState.objects.get(cluster=cluster)
    assert state.agent_fetched_at is not None
    assert state.agent_fetch["host"] == "ctl1"
    assert state.agent_fetch["status"] == 304
    assert state.agent_fetch["fingerprint"] == header.group(2)
    assert state.agent_fetch["address"] == "127.0.0.1"

    # The cluster page shows the agent's last fetch: when, from which host and address,
    # which table; and the token bound to the agent.
    page = login(world.ops).get(f"/clusters/{cluster.name}/").content.decode()
    assert "ctl1 at 127.0.0.1" in page and "HTTP 304" in page
    assert f"table {header.group(2)}" in page
    assert state.agent_fetched_at.strftime("%Y-%m-%d") in page
    assert "pull agent of hpc" in page


@pytest.mark.django_db
def test_only_a_sync_token_bound_to_the_cluster_gets_its_table(world, member):
    cluster = _pulled_cluster(world)
    other = _pulled_cluster(world, name="hpc2")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=token_for(world.ops, TokenScope.READ))
    response = client.get(_url(cluster))
    assert response.status_code == 403 and "sync" in response.json()["detail"]

    client.credentials(HTTP_AUTHORIZATION=token_for(member, TokenScope.SYNC))
    assert client.get(_url(cluster)).status_code == 403

    # A signed-in session is no agent.
    assert login(world.ops).get(_url(cluster)).status_code == 403

    # A sync token of ops that is bound to no cluster: refused, saying how to make one.
    client.credentials(HTTP_AUTHORIZATION=token_for(world.ops, TokenScope.SYNC))
    response = client.get(_url(cluster))
    assert response.status_code == 403
    assert "not bound to a cluster" in response.json()["detail"]
    assert "agent_token_create --cluster hpc" in response.json()["detail"]

    # Cluster hpc2's agent token fetches hpc2's table, never hpc's.
    client.credentials(HTTP_AUTHORIZATION=agent_token(other, world.ops))
    assert client.get(_url(other)).status_code == 200
    response = client.get(_url(cluster))
    assert response.status_code == 403
    assert response.json()["detail"] == (
        "This token is bound to cluster hpc2: it cannot fetch the table of cluster hpc."
    )
    assert ClusterSyncState.objects.get(cluster=cluster).agent_fetched_at is None
    # Nor may it sync cluster hpc (it may sync its own).
    response = client.post(f"/api/v1/clusters/{cluster.name}/sync/", {"dry_run": True})
    assert response.status_code == 403
    assert "bound to cluster hpc2: it cannot act on cluster hpc" in response.json()["detail"]

    client.credentials(HTTP_AUTHORIZATION=agent_token(cluster, world.ops))
    assert client.get("/api/v1/clusters/nowhere/submit-table/").status_code == 404
    assert client.get(_url(cluster)).status_code == 200
    # A table written beside slurm.conf is not served: a 400 saying why.
    services.cluster_update(
        cluster=cluster,
        user=world.ops,
        reason=REASON,
        data={"submit_table_delivery": SubmitTableDelivery.WRITE},
    )
    response = client.get(_url(cluster))
    assert response.status_code == 400
    assert "pull" in str(response.json()["fields"]["cluster"])


@pytest.mark.django_db
def test_binding_a_token_to_a_cluster_is_for_ops_with_clear_errors(world, member):
    cluster = _pulled_cluster(world)
    with pytest.raises(PermissionDenied, match="Only ops"):
        services.cluster_agent_token_create(cluster=cluster, user=member)
    token = governance_services.personal_token_create(
        user=world.ops, name="reader", scopes=[TokenScope.READ]
    )
    with pytest.raises(ValidationError, match="needs the “sync” scope"):
        services.cluster_agent_token_bind(cluster=cluster, token=token, user=world.ops)
    made = services.cluster_agent_token_create(cluster=cluster, user=world.ops)
    assert made.scopes == [TokenScope.SYNC]
    other = _pulled_cluster(world, name="hpc2")
    with pytest.raises(ValidationError, match="already bound to cluster hpc"):
        services.cluster_agent_token_bind(cluster=other, token=made, user=world.ops)

    # The command prints the key alone on standard output; bad input is a CommandError.
    out, err = StringIO(), StringIO()
    call_command("agent_token_create", "--cluster", "hpc", "--user", "ops", stdout=out, stderr=err)
    key = out.getvalue().strip()
    assert key.startswith("arb_") and "bound to cluster hpc" in err.getvalue()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get(_url(cluster)).status_code == 200
    with pytest.raises(CommandError, match="No cluster named “nowhere”"):
        call_command("agent_token_create", "--cluster", "nowhere", "--user", "ops")
    with pytest.raises(CommandError, match="Only ops"):
        call_command("agent_token_create", "--cluster", "hpc", "--user", member.username)


@pytest.mark.django_db(transaction=True)
def test_the_agent_writes_the_table_atomically_and_keeps_the_last_good_one(
    world, live_server, tmp_path
):
    cluster = _pulled_cluster(world)
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "job_submit.lua").write_text(plugin_source())
    token = agent_token(cluster, world.ops)
    table = etc / "arbiter_submit_table.lua"

    first = run_agent(live_server.url, cluster, etc, token)
    assert first.returncode == 0, first.stderr
    assert table.read_bytes() == cluster.sync_state.submit_table.encode()
    assert oct(table.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in etc.iterdir() if p.name.startswith(".arbiter-table-")] == []
    state = ClusterSyncState.objects.get(cluster=cluster)
    assert state.agent_fetch["status"] == 200
    assert state.agent_fetch["plugin_version"] == plugin_version()

    # Unchanged: a 304, and the file is not touched.
    inode = table.stat().st_ino
    second = run_agent(live_server.url, cluster, etc, token)
    assert second.returncode == 0 and "unchanged" in second.stderr, second.stderr
    assert table.stat().st_ino == inode

    # The plugin's status comes from the agent's report: installed, current, table current.
    status = services.submit_refresh(
        cluster=cluster, backend=services.backend_for(cluster), write=False, recheck=False
    )
    assert status["installed"] and status["current"] and status["table_current"], status

    # A new table (the guard's minute renews the expiry): replaced by rename (a new inode).
    time.sleep(1.1)
    services.submit_refresh(
        cluster=cluster, backend=services.backend_for(cluster), write=True, recheck=False
    )
    third = run_agent(live_server.url, cluster, etc, token)
    assert third.returncode == 0, third.stderr
    assert table.read_bytes() == ClusterSyncState.objects.get(cluster=cluster).submit_table.encode()
    assert table.stat().st_ino != inode
    good = table.read_bytes()

    # Arbiter unreachable, or the token refused: the last good table stays, the agent fails.
    down = run_agent("http://127.0.0.1:1", cluster, etc, token)
    assert down.returncode != 0 and "keeping the table in place" in down.stderr
    refused = run_agent(live_server.url, cluster, etc, "Bearer arb_not-a-token")
    assert refused.returncode != 0 and "HTTP 401" in refused.stderr, refused.stderr
    assert table.read_bytes() == good
    assert [p.name for p in etc.iterdir() if p.name.startswith(".arbiter-table-")] == []


@pytest.mark.django_db
@pytest.mark.parametrize("lapse", [SubmitTableLapse.REFUSE, SubmitTableLapse.NATIVE])
def test_an_expired_table_alerts_ops_with_what_the_plugin_does_then(world, lapse):
    cluster = _pulled_cluster(world, lapse=lapse)
    table = cluster.sync_state.submit_table
    # The cluster's choice travels in the table, for the plugin.
    assert ('["on_expiry"] = "native"' in table) == (lapse == SubmitTableLapse.NATIVE)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=agent_token(cluster, world.ops))
    assert client.get(_url(cluster)).status_code == 200
    expires = ClusterSyncState.objects.get(cluster=cluster).agent_fetch["expires"]

    status = {"table_expires": expires}
    assert not services.submit_table_expiry_check(cluster=cluster, status=status)
    assert not Alert.objects.filter(kind=AlertKind.SUBMIT_TABLE_EXPIRED).exists()

    # The agent stopped fetching (Arbiter unreachable from the controller): past the expiry.
    assert services.submit_table_expiry_check(cluster=cluster, status=status, now=expires + 1)
    alert = Alert.objects.get(kind=AlertKind.SUBMIT_TABLE_EXPIRED, closed_at=None)
    assert alert.cluster == cluster
    assert set(alert.deliveries.values_list("user__username", flat=True)) == {world.ops.username}
    subject, body = alert_text(alert)
    assert "hpc" in subject
    expected = "refuses GPU jobs" if lapse == SubmitTableLapse.REFUSE else "native limits only"
    assert expected in body

    # A current table again closes it.
    assert not services.submit_table_expiry_check(cluster=cluster, status=status, now=expires - 5)
    alert.refresh_from_db()
    assert alert.closed_at is not None


@pytest.mark.django_db
def test_the_delivery_and_the_lapse_are_rule_changes_with_bad_values_refused(world, ops2):
    cluster = _pulled_cluster(world)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=token_for(world.ops))
    response = client.patch(
        f"/api/v1/clusters/{cluster.name}/",
        {"submit_table_lapse": "ignore", "reason": REASON},
        format="json",
    )
    assert response.status_code == 400
    assert "submit_table_lapse" in response.json()["fields"]
    response = client.patch(
        f"/api/v1/clusters/{cluster.name}/",
        {"submit_table_lapse": "native", "reason": REASON},
        format="json",
    )
    assert response.status_code == 201, response.json()
    detail = client.get(f"/api/v1/clusters/{cluster.name}/").json()
    assert detail["submit_table_lapse"] == "refuse"  # proposed, not applied yet
    assert detail["submit_table_delivery"] == "pull"
    assert detail["agent_fetched_at"] is None
