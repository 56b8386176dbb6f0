"""Service accounts and API tokens.

A service account is a dedicated ``User`` (``is_service_account``) that never signs in to the
pages and never decides anything: it belongs to one project (a member of it, nothing more) or,
for ops tools, to no project (site-wide: it reads everything and does what ops do within its
token's scopes, except approving). A token authenticates as its ``user`` (a service account's,
or a person's own personal token). Only a SHA-256 digest of the secret is stored; the short
public ``prefix`` finds the row.
"""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from .projects import Project


class TokenScope(models.TextChoices):
    """What a token may do. A view declares ``required_scope``; by default safe methods need
    ``read`` and every other method ``request``."""

    READ = "read", _("Read")
    REQUEST = "request", _("Request")
    INGEST = "ingest", _("Ingest")
    SYNC = "sync", _("Sync")


class ServiceAccount(models.Model):
    """A pipeline's or an ops tool's identity: its ``user`` holds the name and the tokens."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.PROTECT,
        related_name="service_account",
    )
    project = models.ForeignKey(
        Project,
        verbose_name=_("project"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="service_accounts",
        help_text=_("Empty: a site-wide account for ops tools."),
    )
    description = models.CharField(_("description"), max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("created by"),
        on_delete=models.PROTECT,
        related_name="+",
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    deactivated_at = models.DateTimeField(_("deactivated at"), null=True, blank=True)
    # A site-wide account acts as ops: a second person (ops, not its maker) approves it
    # before it works. A project's account is approved when made (``approved_by`` empty).
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("approved by"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    approved_at = models.DateTimeField(_("approved at"), null=True, blank=True)

    history = HistoricalRecords()

    class Meta:
        verbose_name = _("service account")
        verbose_name_plural = _("service accounts")
        constraints = [
            models.CheckConstraint(
                condition=Q(deactivated_at__isnull=True) | Q(deactivated_at__gte=F("created_at")),
                name="service_account_deactivated_after_created",
            ),
            models.CheckConstraint(
                condition=Q(approved_by__isnull=True) | Q(approved_at__isnull=False),
                name="service_account_approved_when",
            ),
            models.CheckConstraint(
                condition=~Q(approved_by=F("created_by")),
                name="service_account_approver_not_maker",
            ),
        ]

    def __str__(self) -> str:
        return self.user.username

    @property
    def is_site_wide(self) -> bool:
        return self.project_id is None

    @property
    def is_active(self) -> bool:
        return self.deactivated_at is None

    @property
    def awaits_approval(self) -> bool:
        return self.approved_at is None


class ApiToken(models.Model):
    """A bearer token: ``<prefix>.<secret>``; the row keeps the prefix and the digest only."""

    # The whole token, set by the service that makes it on the instance it returns: shown
    # once, never stored (not a field).
    key: str

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="api_tokens",
    )
    name = models.CharField(_("name"), max_length=100)
    prefix = models.CharField(_("prefix"), max_length=16, unique=True)
    digest = models.CharField(_("digest"), max_length=64, unique=True)
    scopes = models.JSONField(_("scopes"), default=list)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("created by"),
        on_delete=models.PROTECT,
        related_name="+",
    )
    created_at = models.DateTimeField(_("created at"))
    expires_at = models.DateTimeField(_("expires at"))
    revoked_at = models.DateTimeField(_("revoked at"), null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("revoked by"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    # The token that minted this one (a token made with a token): it never lives longer nor
    # may more, and revoking it revokes this one.
    parent = models.ForeignKey(
        "self",
        verbose_name=_("made with token"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="children",
    )
    # A service account's token with the ``request`` scope files changes and requests: a
    # second person (ops who is not behind the account) approves it before it works. Every
    # other token is approved when made (``approved_by`` empty).
    approved_at = models.DateTimeField(_("approved at"), null=True, blank=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("approved by"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )

    history = HistoricalRecords(excluded_fields=["digest"])

    class Meta:
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")
        constraints = [
            models.CheckConstraint(
                condition=Q(expires_at__gt=F("created_at")), name="api_token_expires_after_created"
            ),
            models.CheckConstraint(
                condition=Q(revoked_at__isnull=True, revoked_by__isnull=True)
                | Q(revoked_at__isnull=False, revoked_by__isnull=False),
                name="api_token_revoked_with_who",
            ),
            models.CheckConstraint(
                condition=Q(approved_by__isnull=True) | Q(approved_at__isnull=False),
                name="api_token_approved_when",
            ),
            models.CheckConstraint(
                condition=~Q(approved_by=F("created_by")), name="api_token_approver_not_minter"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def clean(self) -> None:
        scopes = self.scopes
        if (
            not isinstance(scopes, list)
            or not scopes
            or any(scope not in TokenScope.values for scope in scopes)
            or len(set(scopes)) != len(scopes)
        ):
            raise ValidationError(
                {"scopes": _("Choose one or more of: read, request, ingest, sync.")}
            )

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


class ApiTokenUsage(models.Model):
    """When and from where a token was last used (written at most once a minute per token;
    kept apart from the governed token so that use leaves no history rows)."""

    token = models.OneToOneField(
        ApiToken,
        verbose_name=_("token"),
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="usage",
    )
    last_used_at = models.DateTimeField(_("last used at"))
    last_used_address = models.GenericIPAddressField(_("last used from"), null=True, blank=True)

    class Meta:
        verbose_name = _("API token use")
        verbose_name_plural = _("API token uses")

    def __str__(self) -> str:
        return f"{self.token_id} @ {self.last_used_at:%Y-%m-%d %H:%M}"


class ApiWrite(models.Model):
    """One write through the API made with a token: who, with which token, what, and the
    pipeline run that made it (``X-Pipeline-Run-URL``). Append-only."""

    token = models.ForeignKey(
        ApiToken,
        verbose_name=_("token"),
        on_delete=models.CASCADE,
        related_name="writes",
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="api_writes",
    )
    at = models.DateTimeField(_("at"), auto_now_add=True)
    method = models.CharField(_("method"), max_length=10)
    path = models.CharField(_("path"), max_length=500)
    status_code = models.PositiveSmallIntegerField(_("status"))
    pipeline_run_url = models.CharField(_("pipeline run URL"), max_length=500, blank=True)
    address = models.GenericIPAddressField(_("address"), null=True, blank=True)

    class Meta:
        verbose_name = _("API write")
        verbose_name_plural = _("API writes")
        indexes = [models.Index(fields=["user", "-at"], name="api_write_user_at")]

    def __str__(self) -> str:
        return f"{self.method} {self.path} {self.status_code}"
