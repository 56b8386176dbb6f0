"""``IdempotencyKey``: a client's key for a write through the API, and the answer it got."""

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class IdempotencyKey(models.Model):
    """A client's ``Idempotency-Key`` for a write through the API, and the answer it got.

    A retried call with the same key (same principal) and the same body gets the stored
    answer and does nothing again; the same key with another body is refused. The unique
    constraint is what makes two concurrent retries safe: the second insert waits for the
    first transaction and then finds its row. Keys expire after
    ``ARBITER_IDEMPOTENCY_KEY_HOURS``.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="idempotency_keys",
    )
    key = models.CharField(_("key"), max_length=255)
    operation = models.CharField(_("operation"), max_length=100)
    fingerprint = models.CharField(
        _("fingerprint"), max_length=64, help_text=_("SHA-256 of the operation and its body.")
    )
    # Empty only inside the transaction that runs the call (never committed so).
    response_status = models.PositiveSmallIntegerField(_("response status"), null=True, blank=True)
    response_body = models.JSONField(
        _("response body"), encoder=DjangoJSONEncoder, null=True, blank=True
    )
    created_at = models.DateTimeField(_("created at"))
    expires_at = models.DateTimeField(_("expires at"))

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = _("idempotency key")
        verbose_name_plural = _("idempotency keys")
        indexes = [models.Index(fields=["expires_at"], name="idempotency_key_expiry")]
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_per_user"),
            models.CheckConstraint(
                condition=Q(expires_at__gt=models.F("created_at")),
                name="idempotency_key_expires_after_creation",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.key}"
