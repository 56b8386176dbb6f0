"""Queueing, the one-sync-at-a-time lease, retries and "sync due", without a real Slurm.

A cluster whose command prefix names a program that does not exist stands for a Slurm that
cannot be reached: every command fails the way a missing ``sacctmgr`` or an ``ssh`` to a
host that is down fails.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from governance import services as rules
from governance.celery import app
from governance.models import RevisionTrigger
from queues import selectors, services, tasks
from queues.models import ClusterSyncState, SyncRun, SyncStatus, SyncTrigger
from tests.conftest import REASON

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


@pytest.fixture
def eager():
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


def test_a_rule_change_queues_one_sync_per_enabled_cluster(cluster, ops, world, monkeypatch):
    sent = []
    monkeypatch.setattr(tasks.sync_cluster, "delay", lambda run_id: sent.append(run_id))
    other = services.cluster_create(
        user=ops, reason=REASON, name="off", slurm_cluster="x", enabled=False
    )
    revision = rules.rules_revision_create(trigger=RevisionTrigger.GRANT_STARTED)

    runs = services.sync_enqueue_for_revision(revision_id=revision.pk)

    assert [(run.cluster, run.trigger, run.status) for run in runs] == [
        (cluster, SyncTrigger.GRANT, SyncStatus.QUEUED)
    ]
    assert not SyncRun.objects.filter(cluster=other).exists()


def test_the_hook_runs_after_commit_and_sends_nothing_without_clusters(
    world, ops, monkeypatch, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setattr(tasks.sync_cluster, "delay", lambda run_id: sent.append(run_id))
    with django_capture_on_commit_callbacks(execute=True):
        rules.rules_revision_create(trigger=RevisionTrigger.RULE_CHANGE)
    assert sent == []
    assert not SyncRun.objects.exists()


def test_queued_requests_share_one_waiting_sync(cluster, monkeypatch):
    monkeypatch.setattr(tasks.sync_cluster, "delay", lambda run_id: None)
    first = services.sync_enqueue(cluster=cluster, trigger=SyncTrigger.RULE_CHANGE)
    second = services.sync_enqueue(cluster=cluster, trigger=SyncTrigger.GRANT)
    assert first == second


def test_an_unreachable_slurm_is_retried_with_capped_backoff_for_as_long_as_the_rules_are_due(
    cluster, eager, monkeypatch, django_capture_on_commit_callbacks
):
    delays = []
    real_retry = tasks.sync_cluster.retry
    revision = rules.rules_revision_create(trigger=RevisionTrigger.MANUAL)

    def retry(*args, countdown, **kwargs):
        delays.append(countdown)
        if len(delays) == 12:
            # Another sync applies the rules meanwhile: the next attempt stops retrying.
            state = ClusterSyncState.objects.get(cluster=cluster)
            state.applied_revision = revision
            state.due_reason = ""  # as a successful sync leaves it
            state.save()
        return real_retry(*args, countdown=0, **kwargs)

    monkeypatch.setattr(tasks.sync_cluster, "retry", retry)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.sync_enqueue(cluster=cluster, trigger=SyncTrigger.MANUAL)

    run.refresh_from_db()
    # No give-up after a fixed count: exponential, capped at 10 minutes.
    assert delays == [10, 20, 40, 80, 160, 320, 600, 600, 600, 600, 600, 600]
    assert run.status == SyncStatus.FAILED
    assert run.attempts == 12  # the retry after the other sync stops before running
    assert "the rules are no longer due" in run.error
    assert "Cannot run /nonexistent/arbiter-test/bin/sacctmgr" in run.error


def test_an_unreachable_cluster_stays_due_and_the_periodic_sync_queues_it(cluster, monkeypatch):
    rules.rules_revision_create(trigger=RevisionTrigger.MANUAL)
    run = services.sync_now(cluster=cluster, user=None)
    assert run.status == SyncStatus.FAILED
    assert selectors.sync_due(cluster)
    monkeypatch.setattr(tasks.sync_cluster, "delay", lambda run_id: None)
    assert [r.cluster for r in services.sync_enqueue_due()] == [cluster]


def test_one_sync_at_a_time_and_a_crashed_workers_lease_expires(cluster, settings):
    token = services.lease_acquire(cluster=cluster)
    with pytest.raises(services.SyncBusy, match="Another sync of down is running"):
        services.lease_acquire(cluster=cluster)
    # The worker that held it died without releasing: after the lease time, it is free.
    later = timezone.now() + timedelta(seconds=settings.ARBITER_SYNC_LEASE_SECONDS + 1)
    assert services.lease_acquire(cluster=cluster, now=later) != token


def test_a_busy_cluster_makes_the_run_wait_and_retry(cluster):
    services.lease_acquire(cluster=cluster)
    run = SyncRun.objects.create(cluster=cluster, trigger=SyncTrigger.MANUAL)
    with pytest.raises(services.SyncBusy):
        services.sync_execute(run=run)
    run.refresh_from_db()
    assert run.status == SyncStatus.RETRYING
    assert "Another sync" in run.error


def test_the_command_line_reports_an_unreachable_slurm_and_exits_non_zero(cluster, capsys):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="Sync failed for down"):
        call_command("sync_scheduler", "--cluster", "down", "--dry-run")
    assert "Cannot run /nonexistent/arbiter-test/bin/sacctmgr" in capsys.readouterr().err
    with pytest.raises(CommandError, match="No cluster named 'nope'"):
        call_command("sync_scheduler", "--cluster", "nope")


def test_retry_delays_grow_exponentially_and_are_capped():
    assert [services.retry_delay(n) for n in (0, 1, 2, 3, 10)] == [10, 20, 40, 80, 600]


def test_a_requested_sync_that_finds_the_rules_applied_by_another_run_succeeds_naming_it(
    cluster, eager, monkeypatch, django_capture_on_commit_callbacks
):
    """An operator's sync meets another sync holding the lease; that one applies the rules;
    the operator's run then reports success with the other run's id, not a failure."""
    revision = rules.rules_revision_create(trigger=RevisionTrigger.MANUAL)
    other = SyncRun.objects.create(
        cluster=cluster,
        trigger=SyncTrigger.RULE_CHANGE,
        status=SyncStatus.RUNNING,
        started_at=timezone.now() - timedelta(seconds=5),
    )
    token = services.lease_acquire(cluster=cluster)
    real_retry = tasks.sync_cluster.retry

    def retry(*args, countdown, **kwargs):
        # Meanwhile the other run applies the rules (as _applied_record leaves the state).
        state = ClusterSyncState.objects.get(cluster=cluster)
        state.applied_revision = revision
        state.applied_at = timezone.now()
        state.due_reason = ""
        state.save()
        services.lease_release(cluster=cluster, token=token)
        return real_retry(*args, countdown=0, **kwargs)

    monkeypatch.setattr(tasks.sync_cluster, "retry", retry)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.sync_enqueue(cluster=cluster, trigger=SyncTrigger.MANUAL)
    run.refresh_from_db()
    assert run.status == SyncStatus.SUCCEEDED, run.error
    assert run.result["applied_by"] == other.pk
    assert f"applied by sync run {other.pk}" in run.result["note"]
    assert run.error == ""
