"""Alerts raised for ops and project leads, and who each was delivered to."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from .cluster import Cluster


class AlertKind(models.TextChoices):
    OUT_OF_SYNC = "out_of_sync", _("Cluster out of sync")
    LONG_WAIT = "long_wait", _("Job waiting past its tier's threshold")
    RULE_NOT_ENFORCED = "rule_not_enforced", _("Rule not enforced by the scheduler")
    GUARD_ACTION = "guard_action", _("Job held by Arbiter's guard")
    SUBMIT_TABLE_EXPIRED = "submit_table_expired", _("Submit table expired on the controller")


class Alert(models.Model):
    """Something ops (or a tier owner) must look at, raised and closed by a periodic check.

    One alert is open per ``(kind, key)`` at a time (the key names what it is about, e.g.
    ``cluster:3`` or ``job:7:1234``): a check that finds the same condition again updates the
    open alert instead of raising a second one, and closes it once the condition is gone.
    ``details`` holds the parameters the text is rendered from, in the reader's language.
    Not governed: checks write alerts, people only read them.
    """

    kind = models.CharField(_("kind"), max_length=32, choices=AlertKind.choices)
    key = models.CharField(_("key"), max_length=200)
    cluster = models.ForeignKey(
        Cluster,
        verbose_name=_("cluster"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="alerts",
    )
    details = models.JSONField(_("details"), default=dict, blank=True)
    opened_at = models.DateTimeField(_("opened at"))
    updated_at = models.DateTimeField(_("updated at"))
    closed_at = models.DateTimeField(_("closed at"), null=True, blank=True)
    recipients = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("recipients"),
        through="AlertRecipient",
        related_name="alerts",
    )

    class Meta:
        ordering = ["-opened_at", "-pk"]
        verbose_name = _("alert")
        verbose_name_plural = _("alerts")
        indexes = [models.Index(fields=["kind", "closed_at"], name="alert_kind_open")]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=AlertKind.values), name="alert_kind_valid"),
            models.UniqueConstraint(
                fields=["kind", "key"],
                condition=Q(closed_at__isnull=True),
                name="alert_one_open_per_key",
            ),
            models.CheckConstraint(
                condition=Q(closed_at__isnull=True) | Q(closed_at__gte=models.F("opened_at")),
                name="alert_closes_after_it_opens",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.key}"

    @property
    def is_open(self) -> bool:
        return self.closed_at is None


class AlertRecipient(models.Model):
    """Who an alert is for; ``mailed_at`` makes the mail go out once per person."""

    alert = models.ForeignKey(
        Alert, verbose_name=_("alert"), on_delete=models.CASCADE, related_name="deliveries"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="alert_deliveries",
    )
    mailed_at = models.DateTimeField(_("mailed at"), null=True, blank=True)
    read_at = models.DateTimeField(_("read at"), null=True, blank=True)

    class Meta:
        verbose_name = _("alert recipient")
        verbose_name_plural = _("alert recipients")
        constraints = [
            models.UniqueConstraint(fields=["alert", "user"], name="alert_recipient_once"),
        ]

    def __str__(self) -> str:
        return f"{self.alert} → {self.user}"
