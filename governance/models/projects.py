"""Projects and their members."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from .changes import ChangeLinkedHistory


class ProjectRole(models.TextChoices):
    LEAD = "lead", _("Lead")
    MEMBER = "member", _("Member")


class Project(models.Model):
    slug = models.SlugField(_("slug"), max_length=63, unique=True)
    name = models.CharField(_("name"), max_length=200)
    description = models.TextField(_("description"), blank=True)
    tier = models.ForeignKey(
        "PriorityTier",
        verbose_name=_("tier"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="projects",
        help_text=_("The highest tier the project's work may use. Empty means the default tier."),
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="projects"
    )
    history = HistoricalRecords(bases=[ChangeLinkedHistory])

    class Meta:
        ordering = ["name"]
        # The project and quota lists sort by name: a page of them reads the index, not every
        # project (bench/pages.py).
        indexes = [models.Index(fields=["name", "id"], name="project_name")]
        verbose_name = _("project")
        verbose_name_plural = _("projects")

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("project_detail", args=[self.slug])


class Membership(models.Model):
    project = models.ForeignKey(
        Project, verbose_name=_("project"), on_delete=models.CASCADE, related_name="memberships"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="memberships",
    )
    role = models.CharField(
        _("role"), max_length=16, choices=ProjectRole.choices, default=ProjectRole.MEMBER
    )
    history = HistoricalRecords(bases=[ChangeLinkedHistory])

    class Meta:
        ordering = ["project__name", "role", "user__username"]
        verbose_name = _("membership")
        verbose_name_plural = _("memberships")
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique_user"),
            models.CheckConstraint(
                condition=Q(role__in=ProjectRole.values), name="membership_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.get_role_display()}) in {self.project}"

    @property
    def is_lead(self) -> bool:
        return self.role == ProjectRole.LEAD
