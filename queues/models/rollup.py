"""Hourly pre-aggregate of the workload evidence, for the monthly review.

``WorkloadHour`` holds, per UTC hour × pool × flavor × project × tier, the GPU-seconds that
ran, the job-seconds spent waiting on quota and those spent waiting for resources (the pool
had no free GPUs). The review's service, borrowing/lending and
idle-capacity figures read it, so their cost grows with the window (hours × keys), never with
the stored history of jobs. ``queues.services.workload.rollup.workload_hours_roll_up``
maintains it incrementally: it rereads the jobs changed since its watermark (and every job
still open), and applies the difference between what each job contributes now and what it
contributed last time (``WorkloadJobRollup``, one row per job), so running it twice changes
nothing. Not governed: derived data.

``WorkloadWait`` holds, per job with a submit time, its first wait as the review reads it:
the end of that wait (the first start, or the end of a job that never started; none while it
still waits; for a job still waiting when its trace ended, that end, marked ``censored``),
the submit's UTC day and the job's keys (the pool as the rollup resolved it).
The same run maintains it, so the review's waits read one narrow row per job and none of the
job's events.
"""

from typing import TYPE_CHECKING, Any

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from governance.models import GpuFlavor, Pool, PriorityTier, Project

from .workload import WaitCategory, WorkloadJob

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


class WorkloadHour(models.Model):
    """One hour of one (pool, flavor, project, tier): GPU-seconds run, job-seconds waiting on
    quota and for resources."""

    id = models.BigAutoField(primary_key=True)
    hour = models.DateTimeField(_("hour"), help_text=_("Start of the UTC hour."))
    pool = models.ForeignKey(
        Pool, verbose_name=_("pool"), on_delete=models.CASCADE, null=True, related_name="+"
    )
    flavor = models.ForeignKey(
        GpuFlavor, verbose_name=_("flavor"), on_delete=models.CASCADE, null=True, related_name="+"
    )
    project = models.ForeignKey(
        Project, verbose_name=_("project"), on_delete=models.CASCADE, null=True, related_name="+"
    )
    tier = models.ForeignKey(
        PriorityTier, verbose_name=_("tier"), on_delete=models.CASCADE, null=True, related_name="+"
    )
    gpu_seconds = models.BigIntegerField(_("GPU-seconds run"), default=0)
    quota_wait_seconds = models.BigIntegerField(_("job-seconds waiting on quota"), default=0)
    resource_wait_seconds = models.BigIntegerField(
        _("job-seconds waiting for resources"), default=0
    )

    class Meta:
        ordering = ["hour", "id"]
        verbose_name = _("workload hour")
        verbose_name_plural = _("workload hours")
        indexes = [
            # The review reads a window's hours from this index alone on PostgreSQL (INCLUDE:
            # every column it reads; SQLite has no INCLUDE and indexes the hour only).
            models.Index(
                fields=["hour"],
                include=[
                    "pool",
                    "flavor",
                    "project",
                    "gpu_seconds",
                    "quota_wait_seconds",
                    "resource_wait_seconds",
                ],
                name="workload_hour_review",
            ),
            # A project's GPU-hours over a window (the approver's evidence,
            # queues.selectors.evidence): an index-only range of its hours.
            models.Index(
                fields=["project", "hour"], include=["gpu_seconds"], name="workload_hour_project"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    gpu_seconds__gte=0, quota_wait_seconds__gte=0, resource_wait_seconds__gte=0
                ),
                name="workload_hour_non_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H}:00 {self.project_id}/{self.flavor_id}"


class WorkloadJobRollup(models.Model):
    """What one job last contributed to ``WorkloadHour`` (so a re-run applies only a delta)."""

    job = models.OneToOneField(
        WorkloadJob,
        verbose_name=_("job"),
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="rollup",
    )
    # {"key": [pool, flavor, project, tier], "gpus": n, "run": [[t0, t1], ...],
    #  "quota_wait": [[t0, t1], ...], "resource_wait": [[t0, t1], ...]} with epoch seconds
    #  (a contribution stored before "resource_wait" existed counts as none of it).
    contribution = models.JSONField(_("contribution"), default=dict)
    open = models.BooleanField(_("still open"), default=False)

    class Meta:
        verbose_name = _("job rollup")
        verbose_name_plural = _("job rollups")
        indexes = [
            models.Index(fields=["job"], condition=Q(open=True), name="job_rollup_open"),
        ]

    def __str__(self) -> str:
        return f"rollup of {self.job_id}"


def row_key(to: type[models.Model] | str, verbose_name: "StrOrPromise") -> Any:
    """One of a derived row's rule keys (a wait's, or a replayed row's): not indexed (the
    rows are read by window, or by run and side); deleting the object sets it to null, as on
    the job."""
    return models.ForeignKey(
        to,
        verbose_name=verbose_name,
        on_delete=models.SET_NULL,
        null=True,
        db_index=False,
        related_name="+",
    )


class WorkloadWait(models.Model):
    """One job's first wait (derived by the rollup; the review's waits read only this)."""

    job = models.OneToOneField(
        WorkloadJob,
        verbose_name=_("job"),
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="wait",
    )
    submitted_at = models.DateTimeField(_("submitted at"))
    day = models.DateField(_("day submitted"), help_text=_("The UTC day of the submit."))
    # The job's keys, as they are on the job (the pool as the rollup resolved it).
    project = row_key(Project, _("project"))
    tier = row_key(PriorityTier, _("tier"))
    flavor = row_key(GpuFlavor, _("flavor"))
    pool = row_key(Pool, _("pool"))
    category = models.CharField(
        _("wait category"), max_length=16, choices=WaitCategory.choices, blank=True
    )
    wait_end = models.DateTimeField(
        _("wait ended at"),
        null=True,
        help_text=_(
            "The first start; for a job that ended without starting, its end; empty while "
            "the job still waits."
        ),
    )
    censored = models.BooleanField(
        _("censored"),
        default=False,
        db_default=False,
        help_text=_(
            "True when the job was still waiting when its source stopped observing (a trace's "
            "end): the wait ended there as a lower bound, the job still waiting."
        ),
    )
    started = models.BooleanField(
        _("started"),
        default=False,
        help_text=_(
            "Whether the wait ended at a start; false for a job that ended without starting "
            "(cancelled while pending) and for one that still waits."
        ),
    )

    class Meta:
        verbose_name = _("job wait")
        verbose_name_plural = _("job waits")
        indexes = [
            # The review reads a window's waits from this index alone on PostgreSQL (INCLUDE:
            # every column it reads; SQLite has no INCLUDE and indexes the submit time only).
            models.Index(
                fields=["submitted_at"],
                include=[
                    "day",
                    "project",
                    "tier",
                    "flavor",
                    "pool",
                    "category",
                    "wait_end",
                    "censored",
                    "started",
                ],
                name="workload_wait_review",
            ),
            # A project's waits over a window (the approver's evidence,
            # queues.selectors.evidence): an index-only range of its rows.
            models.Index(
                fields=["project", "submitted_at"],
                include=["category", "wait_end", "censored", "started", "job"],
                name="workload_wait_project",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(category__in=[*WaitCategory.values, ""]),
                name="workload_wait_category_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"wait of {self.job_id}"


# The hourly workload rollup's state row (``queues.services.workload.rollup``).
ROLLUP_NAME = "workload_hours"


class RollupState(models.Model):
    """The rollup's watermark: jobs whose ``last_event_at`` is after it are reread, and jobs
    added after ``last_job_id`` are read whatever their times."""

    name = models.CharField(_("name"), max_length=50, unique=True)
    watermark = models.DateTimeField(_("watermark"), null=True, blank=True)
    last_job_id = models.BigIntegerField(
        _("last job read"),
        default=0,
        help_text=_(
            "The highest job id a run has read (a job reported late, or imported, "
            "with times before the watermark is still read once)."
        ),
    )
    last_run_at = models.DateTimeField(_("last run"), null=True, blank=True)
    last_counts = models.JSONField(_("last counts"), default=dict, blank=True)

    class Meta:
        verbose_name = _("rollup state")
        verbose_name_plural = _("rollup states")

    def __str__(self) -> str:
        return f"{self.name}: {self.watermark or '-'}"
