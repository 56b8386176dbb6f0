"""A job's tier is the effective tier the sync compiled (grants included), read back from its
QOS: during a priority upgrade the project's guarantee QOS carries the upgraded tier's
priority, so its jobs are filed under that tier, not the project's base tier."""

from datetime import timedelta

import pytest
from django.utils import timezone

from governance import services
from governance.models import GrantKind, Terms
from queues.models import ClusterSyncState
from queues.services.workload.slurm import Names

from .test_slurm_compiler import _desired

pytestmark = pytest.mark.django_db


def test_guarantee_qos_reads_back_as_the_compiled_effective_tier(world):
    now = timezone.now()
    assert world.vision.tier == world.key
    services.grant_create(
        user=world.ops,
        reason="Deadline",
        project=world.vision,
        terms=Terms(
            kind=GrantKind.PRIORITY_UPGRADE,
            tier=world.production,
            starts_at=now - timedelta(hours=1),
            ends_at=now + timedelta(days=2),
        ),
    )
    cluster, _backend, desired = _desired(world, [world.training])
    compiled = desired["qos"]["training.vision.guarantee"]
    assert compiled["priority"] == str(world.production.scheduler_value)
    ClusterSyncState.objects.update_or_create(cluster=cluster, defaults={"applied_at": now})
    names = Names.for_cluster(cluster)
    described = names.describe(
        account="training.vision", qos="training.vision.guarantee", gres="gpu:a100:1", nodes=""
    )
    assert described["project"] == world.vision and described["tier"] == world.production
    # The borrow QOS too: the job borrows at its project's effective tier.
    borrowed = names.describe(
        account="training.vision", qos="training.borrow", gres="gpu:a100:1", nodes=""
    )
    assert borrowed["tier"] == world.production
    # A QOS named for a tier is that tier, whatever the grants.
    assert names.describe(account="training.vision", qos="key", gres="", nodes="")["tier"] == (
        world.key
    )


def test_before_the_sync_compiled_the_upgrade_jobs_keep_the_compiled_base_tier(world):
    now = timezone.now()
    cluster, _backend, _desired_state = _desired(world, [world.training])
    # The last sync ran two hours ago, before the grant started: Slurm still has the base
    # tier's priority on the guarantee QOS, and that is the tier the job runs at.
    ClusterSyncState.objects.update_or_create(
        cluster=cluster, defaults={"applied_at": now - timedelta(hours=2)}
    )
    services.grant_create(
        user=world.ops,
        reason="Deadline",
        project=world.vision,
        terms=Terms(
            kind=GrantKind.PRIORITY_UPGRADE,
            tier=world.production,
            starts_at=now - timedelta(hours=1),
            ends_at=now + timedelta(days=2),
        ),
    )
    described = Names.for_cluster(cluster).describe(
        account="training.vision", qos="training.vision.guarantee", gres="", nodes=""
    )
    assert described["tier"] == world.key
