"""Workload evidence: every job a scheduler ran or kept waiting, and every change of its state.

``WorkloadJob`` is the latest known state of one job (one row per ``(source, key)``: the key is
the scheduler's job id, or for Slurm ``<id>@<submit epoch>`` since Slurm reuses ids after a
reset of its state);
``WorkloadEvent`` is the append-only record of each change, so waits and usage can be
recomputed and replayed. ``source`` names where the job lives: a cluster's name for the
collectors and the ingest API, ``trace:<format>`` for imported traces.

Sized for a large pool (a 10,000-GPU cluster gives ~100 M events a year): events are only
ever inserted in bulk (``ON CONFLICT DO NOTHING`` on the event id), jobs are upserted in
batches. Indexes serve the per-project questions (``(project, state)``, ``(job, time)``);
on PostgreSQL a BRIN index on the event time keeps time-range scans cheap at ~1/1000 the
size of a B-tree (the rows arrive roughly in time order). The table is not partitioned:
the unique event id would have to include the partition key, and BRIN already keeps the
time scans flat (see ``bench/ingest.py``). Not governed: collectors write these rows.
"""

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from governance.models import GpuFlavor, Pool, PriorityTier, Project

from .cluster import Cluster


class WaitCategory(models.TextChoices):
    """The five reasons a job waits (DESIGN §1), plus what no table knows."""

    RESOURCE = "resource", _("Resource shortage")
    QUOTA = "quota", _("Quota limit")
    QUEUE_RULE = "queue_rule", _("Queue rule")
    DEPENDENCY = "dependency", _("Dependency")
    PLACEMENT = "placement", _("Placement or runtime")
    UNCLASSIFIED = "unclassified", _("Unclassified")


class JobState(models.TextChoices):
    PENDING = "pending", _("Pending")
    RUNNING = "running", _("Running")
    SUSPENDED = "suspended", _("Suspended")
    COMPLETED = "completed", _("Completed")
    FAILED = "failed", _("Failed")
    CANCELLED = "cancelled", _("Cancelled")
    TIMEOUT = "timeout", _("Timed out")
    PREEMPTED = "preempted", _("Preempted")
    NODE_FAIL = "node_fail", _("Node failure")
    OUT_OF_MEMORY = "out_of_memory", _("Out of memory")
    # Still running or waiting when its source stopped observing (a trace's end): closed
    # there, its true end unknown (docs/definitions.md).
    CENSORED = "censored", _("Open at the source's end")


ACTIVE_STATES = (JobState.PENDING, JobState.RUNNING, JobState.SUSPENDED)
FINISHED_STATES = tuple(state for state in JobState if state not in ACTIVE_STATES)


class EventKind(models.TextChoices):
    SUBMITTED = "submitted", _("Submitted")
    PENDING = "pending", _("Pending (reason seen)")
    STARTED = "started", _("Started")
    SUSPENDED = "suspended", _("Suspended")
    RESUMED = "resumed", _("Resumed")
    PREEMPTED = "preempted", _("Preempted")
    REQUEUED = "requeued", _("Requeued")
    ENDED = "ended", _("Ended")


class WorkloadJob(models.Model):
    """One job's latest state and the evidence of why it waits."""

    source = models.CharField(_("source"), max_length=100)
    job_id = models.CharField(_("scheduler job id"), max_length=200)
    key = models.CharField(
        _("job key"),
        max_length=250,
        help_text=_(
            "The job's identity within its source: the scheduler's job id, with the submit "
            "time where the scheduler reuses ids (Slurm: <id>@<submit epoch>)."
        ),
    )
    cluster = models.ForeignKey(
        Cluster,
        verbose_name=_("cluster"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="jobs",
    )
    name = models.CharField(_("job name"), max_length=200, blank=True)
    project = models.ForeignKey(
        Project,
        verbose_name=_("project"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="jobs",
    )
    user_name = models.CharField(_("user"), max_length=150, blank=True)
    tier = models.ForeignKey(
        PriorityTier,
        verbose_name=_("tier"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="jobs",
    )
    queue = models.CharField(_("queue or partition"), max_length=200, blank=True)
    qos = models.CharField(_("QOS or priority class"), max_length=200, blank=True)
    account = models.CharField(_("account"), max_length=200, blank=True)
    gpus = models.FloatField(
        _("GPUs"),
        default=0,
        help_text=_("The GPUs the job asks for; a fraction for a share of one GPU (0.25)."),
    )
    flavor = models.ForeignKey(
        GpuFlavor,
        verbose_name=_("flavor"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="jobs",
    )
    pool = models.ForeignKey(
        Pool,
        verbose_name=_("pool"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text=_(
            "The pool its source names (a trace's --pool-map); empty: the pool of its "
            "project's quota for its flavor, else its cluster's."
        ),
    )
    constraints = models.CharField(_("other constraints"), max_length=500, blank=True)
    submitted_at = models.DateTimeField(_("submitted at"), null=True, blank=True)
    eligible_at = models.DateTimeField(_("eligible at"), null=True, blank=True)
    pending_since = models.DateTimeField(
        _("pending since"),
        null=True,
        blank=True,
        help_text=_("Start of the current wait (the submit time, or the last requeue)."),
    )
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    ended_at = models.DateTimeField(_("ended at"), null=True, blank=True)
    state = models.CharField(_("state"), max_length=16, choices=JobState.choices)
    exit_code = models.CharField(_("exit"), max_length=32, blank=True)
    reason = models.CharField(_("latest reason"), max_length=200, blank=True)
    message = models.TextField(_("latest message"), blank=True)
    category = models.CharField(
        _("wait category"), max_length=16, choices=WaitCategory.choices, blank=True
    )
    clears_by_itself = models.BooleanField(
        _("clears by itself"),
        null=True,
        blank=True,
        help_text=_("True: the wait ends without anyone acting; False: it needs a change."),
    )
    preemptions = models.PositiveIntegerField(_("preemptions"), default=0)
    gpu_seconds_lost = models.BigIntegerField(_("GPU-seconds lost to preemption"), default=0)
    requeues = models.PositiveIntegerField(_("requeues"), default=0)
    waits_recorded = models.BooleanField(
        _("waits recorded"),
        default=True,
        db_default=True,
        help_text=_(
            "False when the job's source cannot tell how long it waited (a trace without start "
            "times, an instance that existed before the trace): the job has no wait."
        ),
    )
    last_event_at = models.DateTimeField(_("last event at"))

    class Meta:
        ordering = ["-last_event_at", "-pk"]
        verbose_name = _("job")
        verbose_name_plural = _("jobs")
        indexes = [
            models.Index(fields=["project", "state"], name="job_project_state"),
            models.Index(fields=["state", "category"], name="job_state_category"),
            # A project's GPU-hours over a window: an index-only scan of the jobs that ended in
            # it or still run (queues.selectors.workload.usage_over).
            models.Index(
                fields=["project", "ended_at", "started_at", "gpus"], name="job_project_ended_use"
            ),
            models.Index(fields=["cluster", "state"], name="job_cluster_state"),
            # The jobs list, newest submit first. (The review reads its waits from
            # WorkloadWait, not from the jobs.)
            models.Index(fields=["submitted_at"], name="job_submitted"),
            # The hourly rollup rereads the jobs changed since its watermark.
            models.Index(fields=["last_event_at"], name="job_last_event"),
            # The approver's evidence: a project's jobs changed since the rollup's watermark.
            models.Index(fields=["project", "last_event_at"], name="job_project_last_event"),
            models.Index(fields=["source", "job_id"], name="job_source_job_id"),
            # The review's count of the jobs whose waits were not recorded: a small partial
            # index instead of a scan of the window's jobs.
            models.Index(
                fields=["submitted_at"],
                name="job_waits_not_recorded",
                condition=Q(waits_recorded=False),
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["source", "key"], name="job_key_unique_per_source"),
            models.CheckConstraint(condition=Q(state__in=JobState.values), name="job_state_valid"),
            models.CheckConstraint(
                condition=Q(category__in=[*WaitCategory.values, ""]), name="job_category_valid"
            ),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True)
                | Q(started_at__isnull=True)
                | Q(ended_at__gte=models.F("started_at")),
                name="job_ends_after_start",
            ),
            models.CheckConstraint(condition=Q(gpus__gte=0), name="job_gpus_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.source}:{self.job_id}"

    @property
    def is_pending(self) -> bool:
        return self.state == JobState.PENDING

    @property
    def gpu_count(self) -> int | float:
        """The GPUs as people write them (3, or 0.46 for a share of one GPU), for pages."""
        gpus = round(float(self.gpus), 3)
        return int(gpus) if gpus.is_integer() else gpus

    @property
    def gpu_plural(self) -> int:
        """The whole number that picks the plural form of ``gpu_count`` (gettext takes
        integers; a fraction reads as plural: "0.5 GPUs")."""
        count = self.gpu_count
        return count if isinstance(count, int) else 2


class WorkloadEvent(models.Model):
    """One change of one job's state, as the scheduler reported it (append-only)."""

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(
        WorkloadJob, verbose_name=_("job"), on_delete=models.CASCADE, related_name="events"
    )
    source = models.CharField(_("source"), max_length=100)
    event_id = models.CharField(_("event id"), max_length=200)
    time = models.DateTimeField(_("time"))
    kind = models.CharField(_("kind"), max_length=16, choices=EventKind.choices)
    state = models.CharField(_("state"), max_length=16, choices=JobState.choices)
    reason = models.CharField(_("reason"), max_length=200, blank=True)
    message = models.TextField(_("message"), blank=True)
    category = models.CharField(
        _("wait category"), max_length=16, choices=WaitCategory.choices, blank=True
    )
    gpus = models.FloatField(_("GPUs"), default=0)

    class Meta:
        ordering = ["time", "id"]
        verbose_name = _("job event")
        verbose_name_plural = _("job events")
        indexes = [
            models.Index(fields=["job", "time"], name="event_job_time"),
            # A job's first start (the review's waits, for the jobs preempted or requeued):
            # read from the index alone.
            models.Index(
                fields=["job", "time"], name="event_job_started", condition=Q(kind="started")
            ),
            # The review counts preemptions, requeues and failures in a window: a small
            # partial index (a few events in a hundred) instead of scanning every event.
            models.Index(
                fields=["time"],
                name="event_review_time",
                condition=Q(kind__in=["preempted", "requeued"])
                | Q(kind="ended", state__in=["failed", "timeout", "out_of_memory", "node_fail"]),
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["source", "event_id"], name="event_unique_id"),
            models.CheckConstraint(condition=Q(kind__in=EventKind.values), name="event_kind_valid"),
            models.CheckConstraint(condition=Q(gpus__gte=0), name="event_gpus_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.source}:{self.event_id} {self.kind}"


class CollectorState(models.Model):
    """Per cluster: the sacct watermark, the last collection, and the lease of one run."""

    cluster = models.OneToOneField(
        Cluster, verbose_name=_("cluster"), on_delete=models.CASCADE, related_name="collector"
    )
    watermark = models.DateTimeField(_("sacct watermark"), null=True, blank=True)
    last_success_at = models.DateTimeField(_("last successful collection"), null=True, blank=True)
    last_attempt_at = models.DateTimeField(_("last attempt"), null=True, blank=True)
    last_error = models.TextField(_("last error"), blank=True)
    failures = models.PositiveIntegerField(_("failures in a row"), default=0)
    last_counts = models.JSONField(_("last counts"), default=dict, blank=True)
    lease_token = models.CharField(_("lease token"), max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(_("lease expires at"), null=True, blank=True)

    class Meta:
        verbose_name = _("collector state")
        verbose_name_plural = _("collector states")

    def __str__(self) -> str:
        return f"{self.cluster}: {self.last_success_at or '-'}"
