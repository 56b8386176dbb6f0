"""People and service accounts, and their site-wide role."""

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from .changes import ChangeLinkedHistory
from .projects import ProjectRole

USERNAME_TAKEN = _(
    "A user with that username already exists (usernames are unique whatever their case, "
    "after Unicode NFKC normalisation)."
)


class SiteRole(models.TextChoices):
    OPS = "ops", _("Ops")
    APPROVER = "approver", _("Approver")
    MEMBER = "member", _("Member")


class User(AbstractUser):
    """A person or a service account. ``site_role`` decides what they may do site-wide.

    Site role, activation and superuser status are governed: they change only through an
    approved rule change (``governance.services.user_access_update``), with history. The
    history keeps no password hash and no login times.
    """

    site_role = models.CharField(
        _("site role"), max_length=16, choices=SiteRole.choices, default=SiteRole.MEMBER
    )
    # A service account's user (``governance.models.ServiceAccount``): it authenticates with
    # API tokens only, never signs in to the pages and never approves, rejects or applies.
    is_service_account = models.BooleanField(_("service account"), default=False)
    language = models.CharField(
        _("language"),
        max_length=16,
        blank=True,
        choices=settings.LANGUAGES,
        help_text=_("The language of the mails Arbiter sends; empty: the site's language."),
    )

    history = HistoricalRecords(
        bases=[ChangeLinkedHistory],
        excluded_fields=["password", "last_login"],
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(site_role__in=SiteRole.values), name="user_site_role_valid"
            ),
            # ``Ops`` beside ``ops`` would read as one person: usernames are unique whatever
            # their case (and NFKC-normalised before they are saved: ``clean()``).
            models.UniqueConstraint(
                Lower("username"),
                name="user_username_unique_ignoring_case",
                violation_error_message=USERNAME_TAKEN,
            ),
            # A service account is never staff, superuser or approver.
            models.CheckConstraint(
                condition=Q(is_service_account=False)
                | Q(
                    is_staff=False,
                    is_superuser=False,
                    site_role__in=[SiteRole.OPS, SiteRole.MEMBER],
                ),
                name="user_service_account_powers",
            ),
        ]

    @property
    def is_ops(self) -> bool:
        return self.is_active and (self.site_role == SiteRole.OPS or self.is_superuser)

    @property
    def is_approver(self) -> bool:
        return (
            self.is_active and self.site_role == SiteRole.APPROVER and not self.is_service_account
        )

    @cached_property
    def role_label(self) -> str:
        """The role the header shows: the site role, or "Lead" for a member who leads a
        project (one query, only for members)."""
        if self.is_superuser:
            return str(_("Superuser"))
        leads = self.memberships.filter(role=ProjectRole.LEAD)  # type: ignore[attr-defined]
        if self.site_role == SiteRole.MEMBER and leads.exists():
            return str(ProjectRole.LEAD.label)
        return self.get_site_role_display()

    def __str__(self) -> str:
        return self.get_full_name() or self.username

    @property
    def picker_label(self) -> str:
        """How a picker names the person: the name with the username beside it (two people
        may share a name, never a username)."""
        name = self.get_full_name()
        return f"{name} ({self.username})" if name else self.username

    def get_absolute_url(self) -> str:
        return reverse("person_detail", args=[self.username])
