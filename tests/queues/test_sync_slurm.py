"""Plan, apply and verify against the real Slurm: what is created, and that a re-sync is idle."""

import pytest

from governance.models import Terms
from queues import selectors, services
from queues.models import ClusterSyncState, SyncStatus
from queues.services.slurm import parse_tres

pytestmark = pytest.mark.django_db


def _qos(slurm, name: str) -> dict[str, str]:
    out = slurm.sacctmgr(
        "-n",
        "-P",
        "show",
        "qos",
        "where",
        f"name={name}",
        "format=name,priority,preempt,preemptmode,grptres,maxtres,maxtrespu,description,maxtrespa",
    )
    fields = out.strip().split("|")
    keys = [
        "name",
        "priority",
        "preempt",
        "mode",
        "grptres",
        "maxtres",
        "maxtrespu",
        "description",
        "maxtrespa",
    ]
    return dict(zip(keys, fields, strict=False))


def _account(slurm, name: str) -> dict[str, str]:
    out = slurm.sacctmgr(
        "-n",
        "-P",
        "show",
        "assoc",
        "where",
        f"account={name}",
        "user=",
        "format=account,parentname,share,grptres",
    )
    fields = out.strip().splitlines()[0].split("|")
    return dict(zip(["account", "parent", "share", "grptres"], fields, strict=False))


def test_first_sync_creates_the_objects_and_a_resync_writes_nothing(lab, slurm):
    from governance import services as rules
    from tests.conftest import REASON

    rules.tier_update(
        tier=lab.key, user=lab.ops, reason=REASON, data={"max_gpus_per_job": 2, "max_gpus_total": 6}
    )
    _vision, _quota = lab.project("vision", tier=lab.key, guarantee=2, borrow=2)
    _speech, _quota = lab.project(
        "speech", guarantee=1, borrow=None, preemption_class=lab.forbidden, flavor=lab.h100
    )

    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    assert run.result["writes"] > 0

    production = _qos(slurm, "production")
    assert production["priority"] == "950"
    assert set(production["preempt"].split(",")) == {"regular", "exploratory", "lab.borrow"}
    assert _qos(slurm, "regular")["mode"] == "requeue"
    # The per-job cap bounds one job only (not what a member holds in the tier).
    key = _qos(slurm, "key")
    assert (key["grptres"], key["maxtres"], key["maxtrespu"]) == ("gres/gpu=6", "gres/gpu=2", "")
    assert _qos(slurm, "regular")["maxtrespu"] == ""
    # speech's work is forbidden to preempt: it gets protected tiers, in nobody's Preempt list.
    assert _qos(slurm, "regular-protected")["priority"] == "400"
    guarantee = _qos(slurm, "lab.vision.guarantee")
    # A guarantee QOS caps with MaxTRESPerAccount: a GrpTRES would switch off the account's.
    assert guarantee["grptres"] == ""
    assert parse_tres(guarantee["maxtrespa"]) == {
        "gres/gpu": "2",
        "gres/gpu:a100": "2",
        "gres/gpu:h100": "0",
    }
    assert guarantee["preempt"] == "lab.borrow"
    vision_account = _account(slurm, "lab.vision")
    assert vision_account["parent"] == "lab"
    # Every GRES type of the pool is limited: 0 where the project has no quota.
    assert parse_tres(vision_account["grptres"]) == {
        "gres/gpu": "4",
        "gres/gpu:a100": "4",
        "gres/gpu:h100": "0",
    }
    # Unbounded borrowing is bounded by the pool's capacity of the flavor.
    assert parse_tres(_account(slurm, "lab.speech")["grptres"]) == {
        "gres/gpu": "4",
        "gres/gpu:a100": "0",
        "gres/gpu:h100": "4",
    }
    users = slurm.sacctmgr(
        "-n",
        "-P",
        "show",
        "assoc",
        "where",
        "user=root",
        "account=lab.speech",
        "format=qos,defaultqos",
    ).strip()
    qos_list, default_qos = users.split("|")
    assert set(qos_list.split(",")) == {
        "regular-protected",
        "exploratory-protected",
        "lab.speech.guarantee",
    }
    assert default_qos == "regular-protected"

    again = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert again.status == SyncStatus.SUCCEEDED, again.error
    assert again.result["writes"] == 0
    assert again.result["changes"] == 0
    # The two reads (QOS; accounts and associations), the tracked TRES, the nodes and one
    # scontrol show config (priority settings, JobSubmitPlugins); nothing else.
    assert again.result["calls"] == 5


def test_hand_made_objects_are_never_touched(lab, slurm):
    slurm.sacctmgr("-i", "add", "qos", "handmade", "Priority=5")
    slurm.sacctmgr("-i", "add", "qos", "key", "Priority=1", "Description=made by hand")
    try:
        from governance import services as rules
        from governance.models import RevisionTrigger

        rules.rules_revision_create(trigger=RevisionTrigger.MANUAL)
        lab.project("vision", tier=lab.key, guarantee=1)
        run = services.sync_now(cluster=lab.cluster, user=lab.ops)
        conflicts = [c for c in run.plan if c["action"] == "conflict"]
        assert [(c["kind"], c["name"]) for c in conflicts] == [("qos", "key")]
        assert _qos(slurm, "key")["priority"] == "1"
        assert _qos(slurm, "handmade")["priority"] == "5"
        # Not "Succeeded": the page says what to do, and the rules stay due.
        assert run.status == SyncStatus.NEEDS_ATTENTION
        assert "rename or remove a hand-made object" in run.error
        assert selectors.sync_due(lab.cluster)
    finally:
        slurm.remove_arbiter_objects()  # an association's DefaultQOS may name "key"
        slurm.sacctmgr("-i", "delete", "qos", "where", "name=handmade,key")


def test_a_grant_queues_a_sync_that_a_worker_applies(
    lab, slurm, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.urls import reverse
    from django.utils import timezone

    from governance import services as rules
    from governance.celery import app
    from governance.models import GrantKind
    from queues import selectors
    from queues.models import SyncRun, SyncTrigger
    from tests.conftest import REASON, login

    epsilon, _quota = lab.project("epsilon", guarantee=1, borrow=1)
    services.sync_now(cluster=lab.cluster, user=lab.ops)
    now = timezone.now()
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            rules.grant_create(
                user=lab.ops,
                reason=REASON,
                project=epsilon,
                terms=Terms(
                    kind=GrantKind.QUOTA_EXCEPTION,
                    pool=lab.pool,
                    flavor=lab.a100,
                    extra_gpus=3,
                    starts_at=now,
                    ends_at=now + timedelta(hours=1),
                ),
            )
    finally:
        app.conf.task_always_eager = False

    run = SyncRun.objects.get(trigger=SyncTrigger.GRANT)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    assert [(c["kind"], c["name"]) for c in run.plan] == [("account", "lab.epsilon")]
    assert parse_tres(_account(slurm, "lab.epsilon")["grptres"])["gres/gpu"] == "5"
    assert not selectors.sync_due(lab.cluster)
    page = login(lab.ops).get(reverse("sync_run_detail", args=["lab", run.pk]))
    assert "gres/gpu=2,gres/gpu:a100=2" in page.content.decode()
    assert "gres/gpu=5,gres/gpu:a100=5" in page.content.decode()


def test_a_protected_job_moves_to_the_protected_qos_and_back_when_the_grant_ends(lab, slurm):
    from datetime import timedelta

    from django.utils import timezone

    from governance import services as rules
    from governance.models import GrantKind
    from tests.conftest import REASON

    serve, _quota = lab.project("serve", borrow=4)
    services.sync_now(cluster=lab.cluster, user=lab.ops)
    account = lab.account(serve)
    held = slurm.sbatch("--begin=now+600", account=account, qos="exploratory", gpus=1)
    now = timezone.now()
    grant = rules.grant_create(
        user=lab.ops,
        reason=REASON,
        project=serve,
        terms=Terms(
            kind=GrantKind.PREEMPTION_PROTECTION,
            preemption_class=lab.forbidden,
            job_ids=(held,),
            starts_at=now - timedelta(minutes=1),
            ends_at=now + timedelta(hours=1),
        ),
    )

    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.status == SyncStatus.SUCCEEDED, run.error
    # The job keeps its tier, in the variant nobody may preempt, made for it.
    assert slurm.job(held)["qos"] == "exploratory-protected"
    assert _qos(slurm, "exploratory-protected")["priority"] == "100"
    assert "exploratory-protected" not in _qos(slurm, "production")["preempt"]
    changed = {(c["kind"], c["name"]): c for c in run.plan}
    allowed = changed["association", f"root@{account}"]["fields"][0]
    assert allowed["field"] == "qos"
    assert set(allowed["desired"].split(",")) - set(allowed["live"].split(",")) == {
        "exploratory-protected"
    }
    assert ClusterSyncState.objects.get(cluster=lab.cluster).applied_state["job"] == {
        held: {"qos": "exploratory-protected", "restore": "exploratory"}
    }
    assert services.sync_now(cluster=lab.cluster, user=lab.ops).result["writes"] == 0

    rules.grant_revoke(grant=grant, user=lab.ops, reason=REASON)
    ended = services.sync_now(cluster=lab.cluster, user=lab.ops)

    assert ended.status == SyncStatus.SUCCEEDED, ended.error
    back = [c for c in ended.plan if c["kind"] == "job"]
    assert back == [
        {
            "kind": "job",
            "name": held,
            "action": "update",
            "fields": [{"field": "qos", "live": "exploratory-protected", "desired": "exploratory"}],
            "note": "moved back: its grant ended",
        }
    ]
    assert (slurm.job(held)["state"], slurm.job(held)["qos"]) == ("PENDING", "exploratory")
    assert not slurm.sacctmgr("-n", "-P", "show", "qos", "where", "name=exploratory-protected")
    again = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert again.result["writes"] == 0
    assert again.plan == []
    assert ClusterSyncState.objects.get(cluster=lab.cluster).applied_state["job"] == {}
