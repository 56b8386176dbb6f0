"""A hand-made sacctmgr change is drift: shown, kept until ops overwrite it with a sync."""

import pytest

from queues import selectors, services

pytestmark = pytest.mark.django_db


def test_a_hand_made_change_is_detected_as_drift_and_a_sync_overwrites_it(lab, slurm):
    _delta, _quota = lab.project("delta", guarantee=2, borrow=1)
    services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert services.drift_check(cluster=lab.cluster).drift == []

    slurm.sacctmgr(
        "-i", "modify", "account", "where", "name=lab.delta", "set", "GrpTRES=gres/gpu=7"
    )
    slurm.sacctmgr("-i", "modify", "qos", "where", "name=key", "set", "Priority=5")

    state = services.drift_check(cluster=lab.cluster)
    found = {(d["kind"], d["name"], d["field"]): (d["applied"], d["live"]) for d in state.drift}
    assert found == {
        ("account", "lab.delta", "grp_tres"): (
            "gres/gpu=3,gres/gpu:a100=3,gres/gpu:h100=0",
            "gres/gpu=7,gres/gpu:a100=3,gres/gpu:h100=0",
        ),
        ("qos", "key", "priority"): ("700", "5"),
    }
    assert selectors.cluster_live_status(cluster=lab.cluster).drift == state.drift

    run = services.sync_now(cluster=lab.cluster, user=lab.ops)
    assert run.result["changes"] == 2
    assert services.drift_check(cluster=lab.cluster).drift == []


def test_the_five_drift_probes_are_flagged_and_sync_now_keeps_what_was_made_by_hand(
    lab, slurm, ops2
):
    from django.core.exceptions import ValidationError

    from governance import services as rules
    from governance.models import ProjectRole, User
    from tests.conftest import REASON

    delta, _quota = lab.project("delta", guarantee=2, borrow=1)
    nobody = User.objects.create_user(username="nobody", password=None)
    rules.membership_set(
        user=lab.ops, reason=REASON, project=delta, member=nobody, role=ProjectRole.MEMBER
    )
    assert services.sync_now(cluster=lab.cluster, user=lab.ops).status == "succeeded"
    s = slurm.sacctmgr
    # 1. an extra user association under an Arbiter account (a user Arbiter does not know)
    s("-i", "add", "user", "daemon", "account=lab.delta")
    # 2. an extra account under an Arbiter pool account, without Arbiter's mark
    s("-i", "add", "account", "lab.sideline", "parent=lab", "organization=ops")
    # 3. an extra QOS in Arbiter's name space
    s("-i", "add", "qos", "lab.rogue", "Priority=3")
    # 4. a deleted association of an Arbiter-managed member
    s("-i", "delete", "user", "where", "name=nobody", "account=lab.delta")
    # 5. a changed GPU limit on an Arbiter account
    s("-i", "modify", "account", "where", "name=lab.delta", "set", "GrpTRES=gres/gpu=9")
    try:
        found = {(d["kind"], d["name"]): d for d in services.drift_check(cluster=lab.cluster).drift}
        assert found[("association", "daemon@lab.delta")]["note"].startswith("made by hand")
        assert found[("account", "lab.sideline")]["note"].startswith("made by hand")
        assert found[("qos", "lab.rogue")]["note"].startswith("made by hand")
        assert found[("association", "nobody@lab.delta")]["live"] == "(missing)"
        assert found[("account", "lab.delta")]["field"] == "grp_tres"

        run = services.sync_now(cluster=lab.cluster, user=lab.ops)
        assert run.status == "succeeded", run.error
        assert not [c for c in run.plan if c["action"] == "delete"]
        # Arbiter's own objects and values are back; the hand-made ones are still there.
        left = {(d["kind"], d["name"]) for d in services.drift_check(cluster=lab.cluster).drift}
        assert left == {
            ("association", "daemon@lab.delta"),
            ("account", "lab.sideline"),
            ("qos", "lab.rogue"),
        }
        # Removing one takes an explicit choice with a reason, and never Arbiter's own.
        with pytest.raises(ValidationError):
            services.drift_remove(
                cluster=lab.cluster, kind="account", name="lab.sideline", user=lab.ops, reason=""
            )
        with pytest.raises(ValidationError):
            services.drift_remove(
                cluster=lab.cluster, kind="account", name="lab.delta", user=lab.ops, reason="x"
            )
        removed = services.drift_remove(
            cluster=lab.cluster,
            kind="account",
            name="lab.sideline",
            user=lab.ops,
            reason="Left over from a test",
        )
        assert removed.status == "succeeded"
        assert removed.result["reason"] == "Left over from a test"
        assert "lab.sideline" not in s("-n", "-P", "show", "account", "format=account")

        # Adopting the hand-made association: a rule change makes its user a member.
        from governance.services import EditSpec

        daemon = User.objects.create_user(username="daemon", password=None)
        change = rules.rule_change_create(
            user=lab.ops,
            reason=REASON,
            edits=[EditSpec(target=delta, field="membership", key=daemon, value="member")],
        )
        rules.rule_change_approve(change=change, user=ops2)
        rules.rule_change_apply(change=change, user=lab.ops)
        adopted = services.sync_now(cluster=lab.cluster, user=lab.ops)
        assert adopted.status == "succeeded", adopted.error
        assert adopted.result["conflicts"] == 0
        left = {(d["kind"], d["name"]) for d in services.drift_check(cluster=lab.cluster).drift}
        assert ("association", "daemon@lab.delta") not in left
    finally:
        slurm.remove_arbiter_objects()
        slurm.run("sacctmgr", "-i", "delete", "account", "where", "name=lab.sideline", check=False)
        slurm.run("sacctmgr", "-i", "delete", "qos", "where", "name=lab.rogue", check=False)
