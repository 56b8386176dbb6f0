"""People and service accounts, and their site-wide role."""

from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from .changes import ChangeLinkedHistory


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

    history = HistoricalRecords(
        bases=[ChangeLinkedHistory],
        excluded_fields=["password", "last_login"],
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(site_role__in=SiteRole.values), name="user_site_role_valid"
            )
        ]

    @property
    def is_ops(self) -> bool:
        return self.is_active and (self.site_role == SiteRole.OPS or self.is_superuser)

    @property
    def is_approver(self) -> bool:
        return self.is_active and self.site_role == SiteRole.APPROVER

    def __str__(self) -> str:
        return self.get_full_name() or self.username

    def get_absolute_url(self) -> str:
        return reverse("person_detail", args=[self.username])
