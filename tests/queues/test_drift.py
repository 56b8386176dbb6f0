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
