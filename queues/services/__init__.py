"""Writes of the scheduler side: clusters, syncs and drift checks.

``sync_enqueue_for_revision`` is the ``ARBITER_ON_RULES_CHANGED`` hook (see settings).
"""

from .alerts import alert_close, alert_mail_send, alert_raise, alerts_mark_read
from .backends import (
    Action,
    Change,
    DriftItem,
    FieldChange,
    LiveState,
    SchedulerBackend,
    SchedulerError,
    SchedulerUnavailable,
    State,
)
from .clusters import cluster_create, cluster_update
from .slurm import SlurmBackend, SlurmCommands, slurm_conf_lines
from .sync import (
    SyncBusy,
    backend_for,
    desired_state_for,
    drift_check,
    drift_check_all,
    lease_acquire,
    lease_release,
    retry_delay,
    sync_enqueue,
    sync_enqueue_due,
    sync_enqueue_for_revision,
    sync_execute,
    sync_give_up,
    sync_now,
)
from .workload import collect_enqueue_all, collect_run, rules_check, wait_alerts_check

__all__ = [
    "Action",
    "Change",
    "DriftItem",
    "FieldChange",
    "LiveState",
    "SchedulerBackend",
    "SchedulerError",
    "SchedulerUnavailable",
    "SlurmBackend",
    "SlurmCommands",
    "State",
    "SyncBusy",
    "alert_close",
    "alert_mail_send",
    "alert_raise",
    "alerts_mark_read",
    "backend_for",
    "cluster_create",
    "cluster_update",
    "collect_enqueue_all",
    "collect_run",
    "desired_state_for",
    "drift_check",
    "drift_check_all",
    "lease_acquire",
    "lease_release",
    "retry_delay",
    "rules_check",
    "slurm_conf_lines",
    "sync_enqueue",
    "sync_enqueue_due",
    "sync_enqueue_for_revision",
    "sync_execute",
    "sync_give_up",
    "sync_now",
    "wait_alerts_check",
]
