"""Who a person is at the organisation's identity provider (OpenID Connect).

A person signs in through the provider and is matched by the provider's issuer and subject,
never by e-mail or username alone. ``ProviderIdentity`` links that pair to the ``User``.
It also keeps what Arbiter last learnt from the provider: the groups the claim held, when the
provider last confirmed the account (a sign-in, or a refresh-token grant before an API token
is accepted) and when it said the account was gone or disabled.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class ProviderIdentity(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.PROTECT,
        related_name="provider_identities",
    )
    issuer = models.CharField(_("issuer"), max_length=500)
    subject = models.CharField(_("subject"), max_length=255)
    groups = models.JSONField(
        _("groups"), default=list, blank=True, help_text=_("The groups claim at the last sign-in.")
    )
    # The site roles and tier ownerships the claim asked for at the last sign-in, as
    # "role:ops" / "tier:<slug>": a claim proposes each once while it lasts (not at every
    # sign-in); when it disappears and comes back, it proposes again.
    claimed = models.JSONField(_("claimed powers"), default=list, blank=True)
    # The provider's refresh token (encrypted with a key derived from DJANGO_SECRET_KEY): the
    # way to ask the provider whether the account still exists before an API token is used.
    refresh_token = models.TextField(_("refresh token"), blank=True, editable=False)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    last_sign_in_at = models.DateTimeField(_("last sign-in"), null=True, blank=True)
    checked_at = models.DateTimeField(_("last confirmed by the provider"), null=True, blank=True)
    disabled_at = models.DateTimeField(
        _("gone or disabled at the provider since"), null=True, blank=True
    )

    class Meta:
        ordering = ["issuer", "subject"]
        verbose_name = _("identity at the provider")
        verbose_name_plural = _("identities at the provider")
        constraints = [
            models.UniqueConstraint(
                fields=["issuer", "subject"], name="provider_identity_unique_subject"
            ),
            models.CheckConstraint(
                condition=~Q(issuer="") & ~Q(subject=""), name="provider_identity_named"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.subject} @ {self.issuer}"
