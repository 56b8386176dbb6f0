"""A what-if replay of a rule change against the rules in force (``docs/replay.md``).

One row per replay run: the change, its status and progress, the fingerprint of its inputs
(the rules revision, the change's edits and the workload window) and the result (the window,
the jobs replayed, and the capacity and quotas each side ran under). Per run and side, "in
force" and "with the change", the rows the monthly review's queries read in place of the
evidence's: each job's first wait (``ReplayWait``), its hours (``ReplayHour``) and its
preemptions (``ReplayPreemption``); derived, written in bulk, replaced as a whole.
"""

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from governance.models import RuleChange

from .rollup import row_key
from .run import RunRecord
from .workload import WaitCategory


class ReplayStatus(models.TextChoices):
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    DONE = "done", _("Done")
    FAILED = "failed", _("Failed")


class ChangeReplay(RunRecord):
    change = models.ForeignKey(
        RuleChange, verbose_name=_("rule change"), on_delete=models.CASCADE, related_name="+"
    )
    status = models.CharField(
        _("status"), max_length=16, choices=ReplayStatus.choices, default=ReplayStatus.QUEUED
    )
    progress = models.PositiveSmallIntegerField(_("progress (%)"), default=0)
    fingerprint = models.CharField(_("inputs' fingerprint"), max_length=64)
    inputs = models.JSONField(_("inputs"), default=dict, blank=True)
    result = models.JSONField(_("result"), null=True, blank=True)

    class Meta:
        ordering = ["-pk"]
        verbose_name = _("change replay")
        verbose_name_plural = _("change replays")
        indexes = [models.Index(fields=["change", "-id"], name="changereplay_change_recent")]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=ReplayStatus.values), name="changereplay_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(progress__gte=0, progress__lte=100),
                name="changereplay_progress_percent",
            ),
            models.CheckConstraint(
                condition=~Q(status=ReplayStatus.DONE) | Q(result__isnull=False, progress=100),
                name="changereplay_done_has_result",
            ),
            models.UniqueConstraint(
                fields=["change", "fingerprint"], name="changereplay_one_per_inputs"
            ),
        ]

    def __str__(self) -> str:
        return f"replay #{self.pk} of change #{self.change_id}"

    @property
    def is_finished(self) -> bool:
        return self.status in (ReplayStatus.DONE, ReplayStatus.FAILED)


class ReplaySide(models.TextChoices):
    IN_FORCE = "in_force", _("In force")
    WITH_CHANGE = "with_change", _("With the change")


class ReplayWait(models.Model):
    """One replayed job's first wait, in ``WorkloadWait``'s columns, per run and side: the
    monthly review's wait queries read these rows as they read the evidence's
    (``reports.selectors.change_replay``), so the replay's wait figures are the review's."""

    id = models.BigAutoField(primary_key=True)
    replay = models.ForeignKey(
        ChangeReplay, verbose_name=_("replay"), on_delete=models.CASCADE, related_name="waits"
    )
    side = models.CharField(_("side"), max_length=16, choices=ReplaySide.choices)
    submitted_at = models.DateTimeField(_("submitted at"))
    day = models.DateField(_("day submitted"), help_text=_("The UTC day of the submit."))
    project = row_key("governance.Project", _("project"))
    tier = row_key("governance.PriorityTier", _("tier"))
    flavor = row_key("governance.GpuFlavor", _("flavor"))
    pool = row_key("governance.Pool", _("pool"))
    category = models.CharField(
        _("wait category"), max_length=16, choices=WaitCategory.choices, blank=True
    )
    wait_end = models.DateTimeField(
        _("wait ended at"),
        null=True,
        help_text=_("The replayed first start; empty when the job had not started by the end."),
    )
    started = models.BooleanField(
        _("started"),
        default=False,
        help_text=_(
            "Whether the replayed wait ended at a start; false for a job that gave up waiting "
            "and for one not started by the end."
        ),
    )

    class Meta:
        verbose_name = _("replayed job wait")
        verbose_name_plural = _("replayed job waits")
        indexes = [models.Index(fields=["replay", "side"], name="replaywait_run_side")]
        constraints = [
            models.CheckConstraint(
                condition=Q(side__in=ReplaySide.values), name="replaywait_side_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"replayed wait of run #{self.replay_id} ({self.side})"


class ReplayHour(models.Model):
    """One replayed hour of one (pool, flavor, project, tier), in ``WorkloadHour``'s columns,
    per run and side: the monthly review's service and capacity query reads these rows as it
    reads the evidence's rollup (``reports.selectors.change_replay``), so the replay's
    GPU-hours received, shares, borrowing and idle GPU-hours are the review's."""

    id = models.BigAutoField(primary_key=True)
    replay = models.ForeignKey(
        ChangeReplay, verbose_name=_("replay"), on_delete=models.CASCADE, related_name="hours"
    )
    side = models.CharField(_("side"), max_length=16, choices=ReplaySide.choices)
    hour = models.DateTimeField(_("hour"), help_text=_("Start of the UTC hour."))
    pool = row_key("governance.Pool", _("pool"))
    flavor = row_key("governance.GpuFlavor", _("flavor"))
    project = row_key("governance.Project", _("project"))
    tier = row_key("governance.PriorityTier", _("tier"))
    # Floats: a replayed job may hold a fraction of a GPU, and its times are not whole seconds.
    gpu_seconds = models.FloatField(_("GPU-seconds run"), default=0.0)
    quota_wait_seconds = models.FloatField(_("job-seconds waiting on quota"), default=0.0)
    resource_wait_seconds = models.FloatField(_("job-seconds waiting for resources"), default=0.0)

    class Meta:
        verbose_name = _("replayed hour")
        verbose_name_plural = _("replayed hours")
        indexes = [models.Index(fields=["replay", "side"], name="replayhour_run_side")]
        constraints = [
            models.CheckConstraint(
                condition=Q(side__in=ReplaySide.values), name="replayhour_side_valid"
            ),
            models.CheckConstraint(
                condition=Q(gpu_seconds__gte=0, quota_wait_seconds__gte=0)
                & Q(resource_wait_seconds__gte=0),
                name="replayhour_non_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"replayed hour of run #{self.replay_id} ({self.side})"


class ReplayPreemption(models.Model):
    """One replayed preemption, per run and side, in the columns the monthly review's
    preemption query derives from the events (``reports.selectors.review.preemptions``): its
    counts, GPU-hours lost and early preemptions are the review's."""

    id = models.BigAutoField(primary_key=True)
    replay = models.ForeignKey(
        ChangeReplay,
        verbose_name=_("replay"),
        on_delete=models.CASCADE,
        related_name="preemptions",
    )
    side = models.CharField(_("side"), max_length=16, choices=ReplaySide.choices)
    time = models.DateTimeField(_("preempted at"))
    gpus = models.FloatField(_("GPUs"))
    project = row_key("governance.Project", _("project"))
    tier = row_key("governance.PriorityTier", _("tier"))
    preemption_class = row_key("governance.PreemptionClass", _("preemption class"))
    pool = row_key("governance.Pool", _("pool"))
    run_from = models.DateTimeField(_("run started at"), help_text=_("The run it stopped."))
    restart = models.DateTimeField(
        _("started again at"),
        null=True,
        help_text=_("Empty when the job had not started again by the end."),
    )

    class Meta:
        verbose_name = _("replayed preemption")
        verbose_name_plural = _("replayed preemptions")
        indexes = [models.Index(fields=["replay", "side"], name="replaypreempt_run_side")]
        constraints = [
            models.CheckConstraint(
                condition=Q(side__in=ReplaySide.values), name="replaypreempt_side_valid"
            ),
            models.CheckConstraint(condition=Q(gpus__gt=0), name="replaypreempt_gpus_positive"),
        ]

    def __str__(self) -> str:
        return f"replayed preemption of run #{self.replay_id} ({self.side})"
