"""Every QOS the Slurm compiler makes maps back to its tier (and class) in the collector.

The names are made in one place (``values.tier_qos_family``) and read in one place
(``values.parse_tier_qos``, used by the collector's ``Names``): a copy the compiler adds
without the collector knowing it fails here.
"""

import pytest
from django.utils import timezone

from governance import services as rules
from queues.models import Cluster
from queues.schedulers.slurm.values import QOS, parse_tier_qos, tier_qos_family
from queues.services import sync
from queues.services.slurm import SlurmBackend, SlurmCommands
from queues.services.workload.slurm import Names
from tests.conftest import REASON

pytestmark = pytest.mark.django_db


def test_every_compiled_qos_maps_back_to_its_tier_and_class(world):
    kw = {"user": world.ops, "reason": REASON}
    serving = rules.project_create(**kw, slug="serving", name="Serving", tier=world.regular)
    rules.quota_create(
        **kw,
        project=serving,
        pool=world.training,
        flavor=world.h100,
        guarantee=4,
        preemption_class=world.forbidden,
    )
    rules.tier_update(**kw, tier=world.exploratory, data={"max_gpus_total": 8})
    cluster = Cluster.objects.create(name="c", slurm_cluster="c")
    cluster.pools.set([world.training])
    backend = SlurmBackend(cluster_name="c", commands=SlurmCommands())
    desired = sync.desired_state_for(cluster=cluster, backend=backend, at=timezone.now())
    compiled = set(desired[QOS])
    # The copies this test is about are there: cautious copies and a protected one.
    assert {"regular.cautious", "exploratory.cautious", "regular-protected"} <= compiled

    names = Names.for_cluster(cluster)
    tiers = {t.slug: t for t in (world.exploratory, world.regular, world.key, world.production)}
    for qos in sorted(compiled):
        job = names.describe(account="training.vision", qos=qos, gres="gpu:a100:1", nodes="1")
        assert job["tier"] is not None, qos
        parsed = parse_tier_qos(qos)
        if qos in tiers or (parsed and parsed[0] in tiers and parsed[1] != "borrow"):
            tier = tiers[parsed[0]]  # type: ignore[index]
            assert job["tier"] == tier, qos
            assert names.tier_of(qos) == (tier, parsed[1]), qos  # type: ignore[index]
            # And the name is one the family function makes for that tier.
            assert qos in tier_qos_family(tier, classes=["cautious"], protected=True)
    # A guarantee or borrow QOS is filed under the project's effective tier.
    assert (
        names.describe(
            account="training.vision", qos="training.borrow.cautious", gres="", nodes="1"
        )["tier"]
        == world.key
    )
