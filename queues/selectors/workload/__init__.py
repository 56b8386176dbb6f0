"""Reads of the workload evidence: why one job waits, a project's jobs, usage and waits.

One module per part: ``access`` (whose jobs a person sees), ``queue`` (where a job stands),
``explain`` (why it waits, in words), ``lists`` (a project's jobs, the API's lists) and
``usage`` (GPU-seconds over a window).
"""

from .access import job_get, user_can_see_all_jobs, visible_jobs, workload_project_get
from .explain import (
    CATEGORY_TEXT,
    FIGURE_NAMES,
    UNKNOWN_LABEL,
    UNKNOWN_TEXT,
    WHY_UNKNOWN,
    WaitExplanation,
    gpus_text,
    job_wait_explanation,
    next_step,
    queue_jump_url,
    quota_request_url,
    waited_seconds,
)
from .lists import (
    PENDING_SHOWN,
    ProjectWorkload,
    jobs_by_project,
    jobs_status,
    project_workload,
    recent_waits,
)
from .queue import FlavorUse, job_diagnosis, project_flavor_use, queue_state
from .usage import USAGE_SQL, usage_figures, usage_over, usage_seconds

__all__ = [
    "CATEGORY_TEXT",
    "FIGURE_NAMES",
    "PENDING_SHOWN",
    "UNKNOWN_LABEL",
    "UNKNOWN_TEXT",
    "USAGE_SQL",
    "WHY_UNKNOWN",
    "FlavorUse",
    "ProjectWorkload",
    "WaitExplanation",
    "gpus_text",
    "job_diagnosis",
    "job_get",
    "job_wait_explanation",
    "jobs_by_project",
    "jobs_status",
    "next_step",
    "project_flavor_use",
    "project_workload",
    "queue_jump_url",
    "queue_state",
    "quota_request_url",
    "recent_waits",
    "usage_figures",
    "usage_over",
    "usage_seconds",
    "user_can_see_all_jobs",
    "visible_jobs",
    "waited_seconds",
    "workload_project_get",
]
