"""``Notification``: a message to one person about a request, shown in the portal and mailed."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from governance.models.texts import message_text

from .requests import UpgradeRequest


class NotificationEvent(models.TextChoices):
    SUBMITTED = "submitted", _("Waiting for your decision")
    APPROVAL = "approval", _("Approval recorded")
    APPROVED = "approved", _("Approved")
    REJECTED = "rejected", _("Rejected")
    WITHDRAWN = "withdrawn", _("Withdrawn")
    ACTIVATED = "activated", _("Grant started")
    ENDING_SOON = "ending_soon", _("Grant ends within a day")
    EXPIRED = "expired", _("Grant ended")
    REVOKED = "revoked", _("Revoked")


class Notification(models.Model):
    """A message to one person, shown in the portal (and mailed when it was created)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="notifications",
    )
    request = models.ForeignKey(
        UpgradeRequest,
        verbose_name=_("request"),
        on_delete=models.CASCADE,
        related_name="notifications",
    )
    event = models.CharField(_("event"), max_length=16, choices=NotificationEvent.choices)
    # The text in English, as it was mailed to English readers; rows written before
    # ``message`` existed have only this (in their writer's language).
    text = models.CharField(_("text"), max_length=500)
    # The message id and its parameters: the text in the reader's language (``body``).
    message = models.JSONField(_("message"), null=True, blank=True, editable=False)
    link = models.CharField(_("link"), max_length=300)
    created_at = models.DateTimeField(_("created at"))
    read_at = models.DateTimeField(_("read at"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = _("notification")
        verbose_name_plural = _("notifications")
        indexes = [models.Index(fields=["user", "read_at"], name="notification_unread")]
        constraints = [
            models.CheckConstraint(
                condition=Q(event__in=NotificationEvent.values), name="notification_event_valid"
            ),
            # The expiry reminders go out once per person and request, however often the
            # beat task runs: this constraint is what makes a second run send nothing.
            models.UniqueConstraint(
                fields=["user", "request", "event"],
                condition=Q(event__in=[NotificationEvent.ENDING_SOON, NotificationEvent.EXPIRED]),
                name="notification_expiry_once",
            ),
        ]

    def __str__(self) -> str:
        return self.body

    @property
    def body(self) -> str:
        """The text in the active language."""
        return message_text(self.message, self.text)
