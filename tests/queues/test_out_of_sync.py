"""A cluster whose rules stay due past the threshold: ops hear once, and it closes on sync."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from governance import services as rules
from governance.celery import app
from governance.models import RevisionTrigger
from queues import services
from queues.models import Alert, AlertKind, Cluster, ClusterSyncState, SyncRun, SyncTrigger

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager():
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


def test_ops_are_told_once_after_the_threshold_and_the_alert_closes_when_in_sync(
    ops, ops2, member, eager, settings, django_capture_on_commit_callbacks
):
    settings.ARBITER_OUT_OF_SYNC_MINUTES = 30
    cluster = Cluster.objects.create(name="hpc", slurm_cluster="hpc")
    revision = rules.rules_revision_create(trigger=RevisionTrigger.RULE_CHANGE)
    SyncRun.objects.create(
        cluster=cluster, trigger=SyncTrigger.PERIODIC, status="failed", error="timed out"
    )
    start = revision.created_at

    assert services.out_of_sync_check(now=start + timedelta(minutes=29)) == []
    assert not Alert.objects.exists()
    for minutes in (31, 45, 90):
        with django_capture_on_commit_callbacks(execute=True):
            assert services.out_of_sync_check(now=start + timedelta(minutes=minutes)) == [
                cluster.pk
            ]

    alert = Alert.objects.get(kind=AlertKind.OUT_OF_SYNC, key=f"cluster:{cluster.pk}")
    assert alert.details == {"cluster": "hpc", "minutes": 90, "error": "timed out"}
    assert sorted(m.to[0] for m in mail.outbox) == ["ops2@example.com", "ops@example.com"]
    assert set(alert.recipients.all()) == {ops, ops2}
    assert services.due_since(cluster=cluster) == start

    # A successful sync applies the newest revision: the next check closes the alert.
    state, _created = ClusterSyncState.objects.get_or_create(cluster=cluster)
    state.applied_revision = revision
    state.save()
    services.out_of_sync_check(now=timezone.now())
    alert.refresh_from_db()
    assert alert.closed_at is not None
    assert len(mail.outbox) == 2
