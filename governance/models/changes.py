"""Rule changes: audited change sets of rule edits, their review, application and rollback.

A ``RuleChange`` groups one or more ``RuleEdit`` rows (object, field, old value → new value).
It is proposed, approved by someone else, then applied in one transaction through the
services of each rule kind. Every history row written while a change is applied points to
it (``rule_change`` on the historical models, set by the receiver below), so "which change
did this?" is one query. Nothing here is ever deleted: a rollback is a new change.

``Review`` records the periodic review of a tier or a quota (keep, modify, retire).
"""

from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.contrib.contenttypes.fields import GenericForeignKey
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.db.models import F, Q
from django.dispatch import receiver
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords
from simple_history.signals import pre_create_historical_record

from .texts import message_text, stored_text
from .triggers import validate_rollback_trigger


class ChangeStatus(models.TextChoices):
    DRAFT = "draft", _("Draft")
    PROPOSED = "proposed", _("Proposed")
    APPROVED = "approved", _("Approved")
    APPLIED = "applied", _("Applied")
    REJECTED = "rejected", _("Rejected")
    WITHDRAWN = "withdrawn", _("Withdrawn")
    ROLLED_BACK = "rolled_back", _("Rolled back")


OPEN_STATUSES = (ChangeStatus.DRAFT, ChangeStatus.PROPOSED, ChangeStatus.APPROVED)


class ChangeAction(models.TextChoices):
    """What someone may do to a rule change; ``selectors.change_action_blocker`` says who when."""

    PROPOSE = "propose", _("Propose")
    APPROVE = "approve", _("Approve")
    REJECT = "reject", _("Reject")
    WITHDRAW = "withdraw", _("Withdraw")
    APPLY = "apply", _("Apply")
    ROLL_BACK = "roll_back", _("Roll back")


class EditKind(models.TextChoices):
    """What an edit changes. The first five are the scheduling variables that a small change
    should not mix; the last three never change how work is scheduled (``scheduler``: which
    cluster enforces the rules and how Arbiter reaches it)."""

    PRIORITY = "priority", _("Priority")
    QUOTA = "quota", _("Quota")
    PREEMPTION = "preemption", _("Preemption")
    PLACEMENT = "placement", _("Placement")
    CAPACITY = "capacity", _("Capacity")
    ACCESS = "access", _("Access")
    DESCRIPTION = "description", _("Description")
    SCHEDULER = "scheduler", _("Scheduler connection")


SCHEDULING_KINDS = frozenset(
    {
        EditKind.PRIORITY,
        EditKind.QUOTA,
        EditKind.PREEMPTION,
        EditKind.PLACEMENT,
        EditKind.CAPACITY,
    }
)


class RuleChange(models.Model):
    title = models.CharField(_("title"), max_length=200)
    # A title Arbiter wrote, as a message shown in the reader's language (``display_title``);
    # ``title`` holds it in English.
    title_message = models.JSONField(_("title (message)"), null=True, blank=True, editable=False)
    reason = models.TextField(_("reason"))
    ticket = models.CharField(
        _("ticket or link"), max_length=300, blank=True, help_text=_("A ticket id or a URL.")
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("author"),
        on_delete=models.PROTECT,
        related_name="rule_changes",
    )
    status = models.CharField(
        _("status"), max_length=16, choices=ChangeStatus.choices, default=ChangeStatus.DRAFT
    )
    observation_days = models.PositiveIntegerField(
        _("observation window (days)"),
        default=7,
        help_text=_("How long to watch the effect before the next change in the same scope."),
    )
    rollback_condition = models.TextField(
        _("rollback condition"), blank=True, help_text=_("When to roll this change back.")
    )
    # The condition in a form a replay evaluates (``governance.models.triggers``; canonical).
    rollback_trigger = models.CharField(
        _("rollback trigger"),
        max_length=200,
        blank=True,
        validators=[validate_rollback_trigger],
        help_text=_(
            "The rollback condition as a replay evaluates it: metric, scope, comparison and "
            "threshold, e.g. “p90 wait tier training > 30 min”."
        ),
    )
    warnings = models.JSONField(
        _("warnings"),
        default=list,
        blank=True,
        help_text=_("What the plan warned about when the change was proposed."),
    )
    confirmation_reason = models.TextField(
        _("confirmation"),
        blank=True,
        help_text=_("Why the change goes ahead despite the warnings of its plan."),
    )
    rollback_of = models.ForeignKey(
        "self",
        verbose_name=_("rolls back"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="rollbacks",
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("proposed by"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    proposed_at = models.DateTimeField(_("proposed at"), null=True, blank=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("approved by"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    approved_at = models.DateTimeField(_("approved at"), null=True, blank=True)
    applied_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("applied by"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    applied_at = models.DateTimeField(_("applied at"), null=True, blank=True)
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("rejected or withdrawn by"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    closed_at = models.DateTimeField(_("rejected or withdrawn at"), null=True, blank=True)
    close_note = models.TextField(_("note"), blank=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = _("rule change")
        verbose_name_plural = _("rule changes")
        indexes = [
            models.Index(fields=["status", "-applied_at"], name="rule_change_status"),
            # The timeline, newest first: a page walks the index instead of sorting every row.
            models.Index(fields=["-created_at", "-id"], name="rule_change_newest"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=ChangeStatus.values), name="rule_change_status_valid"
            ),
            # The proposer never approves their own change (nor does its author).
            models.CheckConstraint(
                condition=~Q(approved_by=F("proposed_by")), name="rule_change_approver_not_proposer"
            ),
            models.CheckConstraint(
                condition=~Q(approved_by=F("author")), name="rule_change_approver_not_author"
            ),
            models.CheckConstraint(
                condition=Q(status=ChangeStatus.DRAFT) | Q(proposed_at__isnull=False),
                name="rule_change_proposed_when",
            ),
            models.CheckConstraint(
                condition=~Q(
                    status__in=[
                        ChangeStatus.APPROVED,
                        ChangeStatus.APPLIED,
                        ChangeStatus.ROLLED_BACK,
                    ]
                )
                | Q(approved_by__isnull=False, approved_at__isnull=False),
                name="rule_change_approved_by_whom",
            ),
            models.CheckConstraint(
                condition=~Q(status__in=[ChangeStatus.APPLIED, ChangeStatus.ROLLED_BACK])
                | Q(applied_by__isnull=False, applied_at__isnull=False),
                name="rule_change_applied_by_whom",
            ),
            models.CheckConstraint(
                condition=Q(observation_days__lte=366), name="rule_change_observation_year"
            ),
            models.CheckConstraint(
                condition=~Q(rollback_of=F("id")), name="rule_change_not_own_rollback"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"

    def get_absolute_url(self) -> str:
        return reverse("change_detail", args=[self.pk])

    @property
    def display_title(self) -> str:
        """The title in the reader's language when Arbiter generated it."""
        return message_text(self.title_message, self.title)

    @property
    def display_warnings(self) -> list[str]:
        """The plan's warnings in the reader's language (stored as messages; a change
        proposed before that kept its warnings as text in its proposer's language)."""
        return [
            message_text(warning) if isinstance(warning, dict) else stored_text(str(warning))
            for warning in self.warnings or []
        ]

    @property
    def display_rollback_condition(self) -> str:
        return stored_text(self.rollback_condition)

    @property
    def is_open(self) -> bool:
        return self.status in OPEN_STATUSES


class RuleEdit(models.Model):
    """One field of one object: its value before the change and the value the change sets.

    Values are stored as JSON: a foreign key as its id, a many-to-many field as the sorted
    list of ids, a date as ``YYYY-MM-DD``. Keyed fields hold one entry of a collection:
    a pool's ``capacity`` per flavor (key: the flavor id, ``0`` GPUs when it has none) and a
    project's ``membership`` per user (key: the user id, ``null`` when not a member).
    """

    change = models.ForeignKey(
        RuleChange, verbose_name=_("change"), on_delete=models.PROTECT, related_name="edits"
    )
    content_type = models.ForeignKey(
        ContentType, verbose_name=_("kind of object"), on_delete=models.PROTECT, related_name="+"
    )
    object_id = models.PositiveBigIntegerField(_("object id"))
    target = GenericForeignKey("content_type", "object_id")
    field = models.CharField(_("field"), max_length=64)
    key = models.PositiveBigIntegerField(_("key"), null=True, blank=True)
    kind = models.CharField(_("kind"), max_length=16, choices=EditKind.choices)
    old_value = models.JSONField(_("old value"), null=True, blank=True)
    new_value = models.JSONField(_("new value"), null=True, blank=True)

    class Meta:
        ordering = ["change", "pk"]
        verbose_name = _("rule edit")
        verbose_name_plural = _("rule edits")
        indexes = [models.Index(fields=["content_type", "object_id"], name="rule_edit_target")]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=EditKind.values), name="rule_edit_kind"),
            models.UniqueConstraint(
                fields=["change", "content_type", "object_id", "field"],
                condition=Q(key__isnull=True),
                name="rule_edit_once_per_field",
            ),
            models.UniqueConstraint(
                fields=["change", "content_type", "object_id", "field", "key"],
                condition=Q(key__isnull=False),
                name="rule_edit_once_per_keyed_field",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.change_id}: {self.content_type_id}/{self.object_id}.{self.field}"


class ConflictChoice(models.TextChoices):
    """Rolling back a field that a later change touched: keep its value or restore the old."""

    KEEP = "keep", _("Keep the current value")
    RESTORE = "restore", _("Restore the old value")


class ReviewOutcome(models.TextChoices):
    KEEP = "keep", _("Keep as it is")
    MODIFY = "modify", _("Modify (through a change)")
    RETIRE = "retire", _("Retire")


class Review(models.Model):
    """The record of one periodic review of a tier or a quota."""

    tier = models.ForeignKey(
        "PriorityTier",
        verbose_name=_("tier"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="reviews",
    )
    quota = models.ForeignKey(
        "Quota",
        verbose_name=_("quota"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="reviews",
    )
    outcome = models.CharField(_("outcome"), max_length=16, choices=ReviewOutcome.choices)
    notes = models.TextField(_("notes"))
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("reviewed by"),
        on_delete=models.PROTECT,
        related_name="+",
    )
    reviewed_on = models.DateField(_("reviewed on"))
    next_review_on = models.DateField(_("next review due"), null=True, blank=True)
    change = models.ForeignKey(
        RuleChange,
        verbose_name=_("change"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="reviews",
        help_text=_("The change the review proposed, if any."),
    )
    created_at = models.DateTimeField(_("recorded at"), auto_now_add=True)

    class Meta:
        ordering = ["-reviewed_on", "-pk"]
        verbose_name = _("review")
        verbose_name_plural = _("reviews")
        constraints = [
            models.CheckConstraint(
                condition=Q(outcome__in=ReviewOutcome.values), name="review_outcome_valid"
            ),
            models.CheckConstraint(
                condition=Q(tier__isnull=False, quota__isnull=True)
                | Q(tier__isnull=True, quota__isnull=False),
                name="review_one_subject",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tier or self.quota}: {self.get_outcome_display()} ({self.reviewed_on})"


class ChangeLinkedHistory(models.Model):
    """The base of the historical models of governed rules: each row may name its change."""

    rule_change = models.ForeignKey(
        RuleChange,
        verbose_name=_("rule change"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        abstract = True


# The change being applied in this thread or task, if any (set by ``rule_change_apply``).
applying_change: ContextVar[int | None] = ContextVar("applying_change", default=None)


@receiver(pre_create_historical_record)
def _link_history_to_change(sender: Any, history_instance: Any, **kwargs: Any) -> None:
    change_id = applying_change.get()
    if change_id is not None and hasattr(history_instance, "rule_change_id"):
        history_instance.rule_change_id = change_id
