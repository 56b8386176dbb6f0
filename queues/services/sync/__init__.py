"""Syncing the effective rules to a cluster: queue, run (one at a time), retry, drift.

A sync records a ``SyncRun`` as soon as it is asked for, so ops see it queued; the Celery
task ``queues.tasks.sync_cluster`` runs it. One sync at a time per cluster: a lease on the
cluster's ``ClusterSyncState`` row, taken under ``select_for_update`` and expiring after
``ARBITER_SYNC_LEASE_SECONDS``, so a crashed worker never blocks the cluster for good. When
the scheduler does not answer the task retries with exponential backoff; until a sync
succeeds the cluster's applied revision stays behind the newest ``RulesRevision``, which is
what "sync due" means, and the periodic task tries again.


The package holds one module per part of a sync: ``state`` (the lease, a run's record),
``backend`` (the backend of a cluster, its desired state), ``due`` (queueing, the out-of-sync
alert), ``preflight``, ``run``, ``drift``, ``guard`` and ``submit`` (the job_submit table).
"""

from .backend import backend_for, desired_state_for, sync_export
from .drift import drift_check, drift_check_all, drift_remove
from .due import (
    TRIGGERS_FROM_REVISION,
    due_since,
    out_of_sync_check,
    out_of_sync_close,
    out_of_sync_minutes,
    sync_enqueue,
    sync_enqueue_due,
    sync_enqueue_for_revision,
    sync_give_up,
    sync_is_due,
)
from .guard import guard_check, guard_check_all
from .preflight import cluster_preflight, enforcement_for
from .run import sync_execute, sync_now
from .state import SyncBusy, lease_acquire, lease_release, lease_seconds, retry_delay
from .submit import submit_refresh

__all__ = [
    "TRIGGERS_FROM_REVISION",
    "SyncBusy",
    "backend_for",
    "cluster_preflight",
    "desired_state_for",
    "drift_check",
    "drift_check_all",
    "drift_remove",
    "due_since",
    "enforcement_for",
    "guard_check",
    "guard_check_all",
    "lease_acquire",
    "lease_release",
    "lease_seconds",
    "out_of_sync_check",
    "out_of_sync_close",
    "out_of_sync_minutes",
    "retry_delay",
    "submit_refresh",
    "sync_enqueue",
    "sync_enqueue_due",
    "sync_enqueue_for_revision",
    "sync_execute",
    "sync_export",
    "sync_give_up",
    "sync_is_due",
    "sync_now",
]
