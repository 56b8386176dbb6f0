"""A request's timeline (``RequestEvent``) and its approvers' decisions (``Approval``)."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from governance.models.texts import message_text

from .requests import UpgradeRequest
from .vocabulary import Decision


class EventAction(models.TextChoices):
    CREATED = "created", _("Created")
    SUBMITTED = "submitted", _("Submitted")
    APPROVAL = "approval", _("Approved by one approver")
    APPROVED = "approved", _("Approved")
    REJECTED = "rejected", _("Rejected")
    WITHDRAWN = "withdrawn", _("Withdrawn")
    ACTIVATED = "activated", _("Grant started")
    EXPIRED = "expired", _("Grant ended")
    REVOKED = "revoked", _("Revoked")
    EXTENDED = "extended", _("Extension requested")


class RequestEvent(models.Model):
    """One step of a request's timeline: who did what, when, and what they said."""

    request = models.ForeignKey(
        UpgradeRequest, verbose_name=_("request"), on_delete=models.CASCADE, related_name="events"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("by"), on_delete=models.PROTECT, related_name="+"
    )
    action = models.CharField(_("action"), max_length=16, choices=EventAction.choices)
    comment = models.TextField(_("comment"), blank=True)
    # A comment Arbiter wrote, as a message shown in the reader's language.
    message = models.JSONField(_("message"), null=True, blank=True, editable=False)
    at = models.DateTimeField(_("at"))

    class Meta:
        ordering = ["at", "pk"]
        verbose_name = _("request event")
        verbose_name_plural = _("request events")
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=EventAction.values), name="event_action_valid"
            ),
            # Rejecting, withdrawing... a grant starts or ends once: never two such rows.
            models.UniqueConstraint(
                fields=["request", "action"],
                condition=Q(
                    action__in=[
                        EventAction.SUBMITTED,
                        EventAction.APPROVED,
                        EventAction.REJECTED,
                        EventAction.WITHDRAWN,
                        EventAction.ACTIVATED,
                        EventAction.EXPIRED,
                        EventAction.REVOKED,
                    ]
                ),
                name="event_once_per_request",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.request_id}: {self.get_action_display()} by {self.actor}"

    @property
    def display_comment(self) -> str:
        """The comment: what someone typed, or Arbiter's own in the reader's language."""
        return message_text(self.message, self.comment)


class Approval(models.Model):
    """One approver's decision on one request. Nobody decides a request twice."""

    request = models.ForeignKey(
        UpgradeRequest,
        verbose_name=_("request"),
        on_delete=models.CASCADE,
        related_name="approvals",
    )
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("approver"),
        on_delete=models.PROTECT,
        related_name="approvals",
    )
    decision = models.CharField(_("decision"), max_length=16, choices=Decision.choices)
    comment = models.TextField(_("comment"), blank=True)
    at = models.DateTimeField(_("at"))

    class Meta:
        ordering = ["at", "pk"]
        verbose_name = _("approval")
        verbose_name_plural = _("approvals")
        constraints = [
            models.UniqueConstraint(
                fields=["request", "approver"], name="approval_once_per_approver"
            ),
            models.CheckConstraint(
                condition=Q(decision__in=Decision.values), name="approval_decision_valid"
            ),
            models.CheckConstraint(
                condition=~Q(decision=Decision.REJECT) | ~Q(comment=""),
                name="approval_rejection_has_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.request_id}: {self.get_decision_display()} by {self.approver}"

    @property
    def is_approval(self) -> bool:
        return self.decision == Decision.APPROVE
