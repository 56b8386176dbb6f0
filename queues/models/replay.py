"""A what-if replay of a rule change against the rules in force (``docs/replay.md``).

One row per replay run: the change, its status and progress, the fingerprint of its inputs
(the rules revision, the change's edits and the workload window) and the result, the
review's figures per tier and project "in force" and "with the change".
"""

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from governance.models import RuleChange

from .run import RunRecord


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
