"""Celery tasks of the scheduler sync. Each one only calls a service."""

from celery import shared_task

from queues import services
from queues.models import Cluster, SyncRun, SyncStatus


@shared_task(bind=True, max_retries=None, acks_late=True)
def sync_cluster(self, run_id: int) -> str:  # type: ignore[no-untyped-def]
    """Run a queued sync; retry with capped exponential backoff while the scheduler does not
    answer, for as long as the cluster is due (a failed sync keeps it due until one succeeds;
    ops hear of a cluster late past the threshold)."""
    run = SyncRun.objects.select_related("cluster").filter(pk=run_id).first()
    if run is None or run.is_finished:
        return "gone" if run is None else run.status
    if run.attempts and not services.sync_is_due(cluster=run.cluster):
        # A retry, and another sync applied the rules meanwhile (with no failure since).
        return services.sync_give_up(run=run).status
    try:
        services.sync_execute(run=run)
    except (services.SchedulerUnavailable, services.SyncBusy) as error:
        if not services.sync_is_due(cluster=run.cluster):
            return services.sync_give_up(run=run).status
        raise self.retry(countdown=services.retry_delay(self.request.retries), exc=error) from None
    return SyncStatus(run.status).value


@shared_task
def sync_due_clusters() -> list[int]:
    """Periodic: queue a sync for every enabled cluster whose applied rules are behind."""
    return [run.pk for run in services.sync_enqueue_due()]


@shared_task
def drift_check_clusters() -> dict[str, int]:
    """Periodic: record the live values that differ from what Arbiter last applied."""
    return {state.cluster.name: len(state.drift) for state in services.drift_check_all()}


@shared_task
def enforce_kueue_clusters() -> dict[str, int]:
    """Periodic: Arbiter's enforcer on every Kueue cluster (the rules Kueue cannot hold);
    how many Workloads each pass changed."""
    return {result.cluster: len(result.patched) for result in services.kueue_enforce_all()}


@shared_task
def enforce_kueue_cluster(cluster_id: int) -> int | None:
    """One pass of the enforcer on one cluster (safe to run twice; a deleted cluster is
    skipped)."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return None
    return len(services.kueue_enforce(cluster=cluster).patched)


@shared_task
def alert_mail(alert_id: int) -> int:
    """Mail an alert to its recipients not mailed yet (safe to run twice)."""
    return services.alert_mail_send(alert_id=alert_id)


@shared_task
def check_cluster(cluster_id: int) -> bool | None:
    """ "Check now": store whether the cluster answers, its version and what it tracks.
    Safe to run twice (each run stores a fresh check); a deleted cluster is skipped."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return None
    return services.cluster_check(cluster=cluster).check_ok


@shared_task
def out_of_sync_check() -> list[int]:
    """Periodic: alert ops about clusters whose rules have been due too long; close when synced."""
    return services.out_of_sync_check()


@shared_task
def guard_clusters() -> dict[str, int]:
    """Periodic: requeue and hold the jobs Slurm let past a project's quota."""
    return services.guard_check_all()


@shared_task
def collect_workload() -> list[int]:
    """Periodic: queue one collection per enabled Slurm cluster (none waits for another)."""
    return services.collect_enqueue_all()


@shared_task(acks_late=True)
def collect_cluster_workload(cluster_id: int) -> dict[str, object]:
    """Collect one cluster's jobs; a busy lease or a down cluster is reported, not raised."""
    return services.collect_run(cluster_id=cluster_id)


@shared_task
def workload_checks() -> dict[str, dict[str, int]]:
    """Periodic: long-wait alerts, and the rules-against-reality check."""
    return {
        "waits": services.wait_alerts_check(),
        "rules": services.rules_check(),
    }


@shared_task
def workload_hours_roll_up(until: str | None = None) -> dict[str, int]:
    """Periodic: bring the hourly workload rollup (the review's pre-aggregate) up to date.
    Idempotent (each job's contribution is applied as a difference); ``until`` is ISO 8601."""
    from django.utils.dateparse import parse_datetime

    from queues.services.workload.rollup import workload_hours_roll_up as roll_up

    return roll_up(until=parse_datetime(until) if until else None)


@shared_task(acks_late=True)
def change_replay(replay_id: int) -> str | None:
    """Replay a rule change against the rules in force (safe to run twice: a finished run is
    left as it is)."""
    run = services.change_replay_run(replay_id=replay_id)
    return None if run is None else run.status
