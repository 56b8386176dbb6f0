"""Reads of the scheduler side, one module per concern: ``clusters`` (their sync runs, sync
due, live status), ``alerts``, ``placement`` (where a job would run), ``replay`` (a change's
replay), ``workload`` (jobs and why they wait), ``definitions`` and ``diagnosis`` (a wait's
terms and its explanation), ``metrics``. The views, APIs, services and reports read them
through this package (``selectors.cluster_get``); this file only re-exports."""

from .agent_tokens import agent_token_elsewhere, agent_token_problem, agent_tokens_of
from .alerts import ALERT_BODIES, ALERT_SUBJECTS, RULE_TEXTS, alert_list, alert_text
from .clusters import (
    LiveStatus,
    applied_summary,
    cluster_get,
    cluster_list,
    cluster_list_with_due,
    cluster_live_status,
    newest_revision_id,
    plan_with_labels,
    pool_flavors,
    pool_gres_types,
    require_cluster_access,
    slurm_conf_suggestion,
    stored_sync_state,
    sync_due,
    sync_run_get,
    sync_run_list,
    sync_state,
    user_can_see_clusters,
)
from .evidence import project_workload_summary
from .replay import change_replay_latest
from .workload import (
    job_get,
    job_wait_explanation,
    jobs_by_project,
    jobs_status,
    project_workload,
    visible_jobs,
    workload_project_get,
)

__all__ = [
    "ALERT_BODIES",
    "ALERT_SUBJECTS",
    "RULE_TEXTS",
    "LiveStatus",
    "agent_token_elsewhere",
    "agent_token_problem",
    "agent_tokens_of",
    "alert_list",
    "alert_text",
    "applied_summary",
    "change_replay_latest",
    "cluster_get",
    "cluster_list",
    "cluster_list_with_due",
    "cluster_live_status",
    "job_get",
    "job_wait_explanation",
    "jobs_by_project",
    "jobs_status",
    "newest_revision_id",
    "plan_with_labels",
    "pool_flavors",
    "pool_gres_types",
    "project_workload",
    "project_workload_summary",
    "require_cluster_access",
    "slurm_conf_suggestion",
    "stored_sync_state",
    "sync_due",
    "sync_run_get",
    "sync_run_list",
    "sync_state",
    "user_can_see_clusters",
    "visible_jobs",
    "workload_project_get",
]
