"""A cluster is a governed rule: creating, changing and deleting it is a rule change that a
second ops user approves; applied with history (user, reason, change) and rolled back."""

import pytest
from django.urls import reverse

from governance import services as rules
from governance.models import ChangeStatus, EditKind, RuleChange
from queues import services
from queues.models import Cluster, ClusterSyncState
from tests.conftest import REASON, login

pytestmark = pytest.mark.django_db


def _approve_and_apply(change, user):
    change = rules.rule_change_approve(change=change, user=user)
    return rules.rule_change_apply(change=change, user=user)


def test_creating_a_cluster_from_the_page_proposes_a_change_that_a_second_ops_applies(
    ops, ops2, world
):
    response = login(ops).post(
        reverse("cluster_create"),
        {
            "name": "lab",
            "backend": "slurm",
            "slurm_cluster": "arbiter",
            "slurm_conf": "/etc/slurm/slurm.conf",
            "command_timeout": 30,
            "kube_namespace_template": "{project}",
            "pools": [world.training.pk],
            "enabled": "on",
            "reason": "Sync the training pool",
        },
    )
    change = RuleChange.objects.get()
    assert response.status_code == 302
    assert response.url == change.get_absolute_url()
    assert change.status == ChangeStatus.PROPOSED
    assert not Cluster.objects.exists()  # nothing until someone else approves
    edit = change.edits.get()
    assert (edit.field, edit.kind, edit.old_value) == ("exists", EditKind.SCHEDULER, None)
    assert edit.new_value["slurm_conf"] == "/etc/slurm/slurm.conf"
    page = login(ops).get(change.get_absolute_url()).content.decode()
    assert "lab (to be created)" in page

    # The proposer cannot approve it, on the page or through the API.
    assert login(ops).post(reverse("change_approve", args=[change.pk])).status_code == 403
    change.refresh_from_db()
    assert change.status == ChangeStatus.PROPOSED

    _approve_and_apply(change, ops2)
    cluster = Cluster.objects.get(name="lab")
    assert (cluster.slurm_conf, cluster.command_timeout) == ("/etc/slurm/slurm.conf", 30)
    assert list(cluster.pools.all()) == [world.training]
    assert ClusterSyncState.objects.filter(cluster=cluster).exists()
    for history in cluster.history.all():
        assert history.history_user == ops2
        assert history.history_change_reason == "Sync the training pool"
        assert history.rule_change_id == change.pk
    edit.refresh_from_db()
    assert edit.object_id == cluster.pk  # the change now names the cluster it created


def test_self_approval_of_a_cluster_change_is_refused_in_the_api(ops, ops2, world, api_client):
    api_client.force_authenticate(ops)
    response = api_client.post(
        reverse("api_cluster_list"),
        {"name": "lab", "slurm_cluster": "arbiter", "pools": ["training"], "reason": "New"},
        format="json",
    )
    assert response.status_code == 201, response.content
    change_id = response.json()["id"]
    assert response.json()["status"] == "proposed"
    assert api_client.post(reverse("api_change_approve", args=[change_id])).status_code == 403
    api_client.force_authenticate(ops2)
    assert api_client.post(reverse("api_change_approve", args=[change_id])).status_code == 200
    assert api_client.post(reverse("api_change_apply", args=[change_id])).status_code == 200
    assert Cluster.objects.filter(name="lab").exists()


@pytest.mark.parametrize("persona", ["member", "approver", "lead"])
def test_only_ops_propose_cluster_changes(persona, ops, world, api_client, request):
    cluster = services.cluster_create(
        user=ops, reason=REASON, name="lab", slurm_cluster="arbiter", pools=[world.training]
    )
    user = request.getfixturevalue(persona)
    api_client.force_authenticate(user)
    body = {"name": "x", "slurm_cluster": "x", "reason": "Mine"}
    assert api_client.post(reverse("api_cluster_list"), body, format="json").status_code == 403
    detail = reverse("api_cluster_detail", args=[cluster.name])
    assert api_client.patch(detail, {"enabled": False, "reason": "r"}).status_code == 403
    assert api_client.delete(detail, {"reason": "r"}).status_code == 403
    client = login(user)
    assert client.post(reverse("cluster_create"), {"name": "x"}).status_code == 403
    assert client.post(reverse("cluster_edit", args=["lab"]), {}).status_code == 403
    assert client.post(reverse("cluster_delete", args=["lab"]), {}).status_code == 403
    assert not RuleChange.objects.exists()


def test_an_edit_is_proposed_approved_applied_and_rolled_back(ops, ops2, world, api_client):
    cluster = services.cluster_create(
        user=ops, reason=REASON, name="lab", slurm_cluster="arbiter", pools=[world.training]
    )
    response = login(ops).post(
        reverse("cluster_edit", args=["lab"]),
        {
            "slurm_cluster": "arbiter",
            "command_timeout": 90,
            "kube_namespace_template": "{project}",
            "pools": [world.inference.pk],
            "reason": "Move it",
        },
    )
    assert response.status_code == 302, response.content.decode()
    change = RuleChange.objects.get()
    assert {edit.field for edit in change.edits.all()} == {"command_timeout", "enabled", "pools"}
    cluster.refresh_from_db()
    assert cluster.enabled and cluster.command_timeout == 60  # not applied yet
    _approve_and_apply(change, ops2)
    cluster.refresh_from_db()
    assert (cluster.enabled, cluster.command_timeout) == (False, 90)
    assert list(cluster.pools.all()) == [world.inference]
    latest = cluster.history.order_by("-history_id").first()
    assert latest.history_change_reason == "Move it"
    assert latest.rule_change_id == change.pk

    rollback = rules.rule_change_rollback(change=change, user=ops, reason="Back to training")
    with pytest.raises(Exception, match="someone else"):
        rules.rule_change_approve(change=rollback, user=ops)
    _approve_and_apply(rollback, ops2)
    cluster.refresh_from_db()
    assert (cluster.enabled, cluster.command_timeout) == (True, 60)
    assert list(cluster.pools.all()) == [world.training]
    change.refresh_from_db()
    assert change.status == ChangeStatus.ROLLED_BACK

    # Through the API: a PATCH proposes; a hostile value is a 400 before anything.
    api_client.force_authenticate(ops)
    detail = reverse("api_cluster_detail", args=["lab"])
    bad = api_client.patch(detail, {"slurm_conf": "x; rm -rf /", "reason": "r"}, format="json")
    assert bad.status_code == 400 and "slurm_conf" in bad.json()["fields"]
    good = api_client.patch(detail, {"enabled": False, "reason": "Pause"}, format="json")
    assert good.status_code == 201
    assert [edit["field"] for edit in good.json()["edits"]] == ["enabled"]


def test_deleting_a_cluster_is_a_change_and_its_rollback_creates_it_again(ops, ops2, world):
    cluster = services.cluster_create(
        user=ops,
        reason=REASON,
        name="lab",
        slurm_cluster="arbiter",
        command_timeout=45,
        pools=[world.training],
    )
    response = login(ops).post(reverse("cluster_delete", args=["lab"]), {"reason": "Retired"})
    assert response.status_code == 302
    change = RuleChange.objects.get()
    assert Cluster.objects.filter(pk=cluster.pk).exists()
    _approve_and_apply(change, ops2)
    assert not Cluster.objects.filter(name="lab").exists()
    gone = Cluster.history.filter(name="lab").order_by("-history_id").first()
    assert (gone.history_type, gone.history_change_reason) == ("-", "Retired")
    assert gone.rule_change_id == change.pk

    rollback = rules.rule_change_rollback(change=change, user=ops, reason="Still needed")
    _approve_and_apply(rollback, ops2)
    again = Cluster.objects.get(name="lab")
    assert again.command_timeout == 45
    assert list(again.pools.all()) == [world.training]

    # And rolling back the creation deletes it once more.
    redo = rules.rule_change_rollback(change=rollback, user=ops, reason="No, retire it")
    _approve_and_apply(redo, ops2)
    assert not Cluster.objects.filter(name="lab").exists()


def test_the_dry_run_at_proposal_checks_cluster_edits(ops, world, settings, tmp_path):
    """A value that only the apply can refuse (the credentials file is missing) is refused
    when proposed, through the generic change API as well."""
    settings.ARBITER_KUBE_CREDENTIALS_DIR = str(tmp_path)
    (tmp_path / "token").write_text("t")
    change = services.cluster_propose_create(
        user=ops,
        reason=REASON,
        data={
            "name": "k8s",
            "backend": "kueue",
            "kube_api_server": "https://k8s.example.com",
            "kube_credentials_file": "token",
        },
    )
    assert change.status == ChangeStatus.PROPOSED
    (tmp_path / "token").unlink()
    with pytest.raises(Exception) as error:
        services.cluster_propose_create(
            user=ops,
            reason=REASON,
            data={
                "name": "k9s",
                "backend": "kueue",
                "kube_api_server": "https://k8s.example.com",
                "kube_credentials_file": "token",
            },
        )
    assert "kube_credentials_file" in error.value.message_dict


def test_the_generic_change_api_knows_clusters(ops, world, api_client):
    services.cluster_create(
        user=ops, reason=REASON, name="lab", slurm_cluster="arbiter", pools=[world.training]
    )
    api_client.force_authenticate(ops)
    body = {
        "reason": "Pause",
        "edits": [{"object_type": "cluster", "object": "lab", "field": "enabled", "value": False}],
    }
    response = api_client.post(reverse("api_change_propose"), body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["edits"][0]["object"] == "lab"
    body["edits"][0].update(field="slurm_bin_dir", value="/tmp/evil")
    response = api_client.post(reverse("api_change_propose"), body, format="json")
    assert response.status_code == 400, response.content
