"""Grants (time-boxed changes of the effective rules) and rules revisions."""

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from .projects import Project
from .resources import GpuFlavor, Pool
from .tiers import PreemptionClass, PriorityTier


class GrantKind(models.TextChoices):
    PRIORITY_UPGRADE = "priority_upgrade", _("Priority upgrade")
    QUOTA_EXCEPTION = "quota_exception", _("Quota exception")
    PREEMPTION_PROTECTION = "preemption_protection", _("Preemption protection")
    QUEUE_JUMP = "queue_jump", _("Queue jump")


class GrantState(models.TextChoices):
    SCHEDULED = "scheduled", _("Scheduled")
    ACTIVE = "active", _("Active")
    EXPIRED = "expired", _("Expired")
    REVOKED = "revoked", _("Revoked")


# Which of the kind-specific terms each kind uses; the others stay empty.
KIND_TERMS: dict[str, tuple[str, ...]] = {
    GrantKind.PRIORITY_UPGRADE: ("tier", "job_ids"),
    GrantKind.QUOTA_EXCEPTION: ("pool", "flavor", "extra_gpus", "lift_borrow_limit"),
    GrantKind.PREEMPTION_PROTECTION: ("preemption_class", "job_ids"),
    GrantKind.QUEUE_JUMP: ("tier", "job_ids"),
}
# Kinds that name a tier.
TIER_KINDS = (GrantKind.PRIORITY_UPGRADE, GrantKind.QUEUE_JUMP)
# The terms that only some kinds use, and their empty values.
KIND_SPECIFIC_TERMS: dict[str, Any] = {
    "tier": None,
    "pool": None,
    "flavor": None,
    "extra_gpus": None,
    "lift_borrow_limit": False,
    "preemption_class": None,
    "job_ids": [],
}
# Every term of a grant, in the order forms and the API show them.
TERM_FIELDS = ("kind", *KIND_SPECIFIC_TERMS, "starts_at", "ends_at")


def grant_in_force(
    *, starts_at: datetime, ends_at: datetime, revoked_at: datetime | None, at: datetime
) -> bool:
    """A grant is in force at ``at`` when its time box holds ``at`` (start included, end
    excluded) and it was not revoked by then. The one rule; ``grant_in_force_q`` says the same
    in SQL."""
    return starts_at <= at < ends_at and (revoked_at is None or revoked_at > at)


def grant_in_force_q(at: datetime, *, through: str = "") -> Q:
    """The grants in force at ``at`` (``grant_in_force`` in SQL); ``through`` is the path to
    the grant from the model filtered (``"grant__"`` from a request)."""
    return Q(**{f"{through}starts_at__lte": at, f"{through}ends_at__gt": at}) & (
        Q(**{f"{through}revoked_at__isnull": True}) | Q(**{f"{through}revoked_at__gt": at})
    )


class GrantTerms(models.Model):
    """The terms of a grant: its kind, what it changes and its time box.

    The one home of these fields, their database constraints and their checks: a
    ``Grant`` has them, and so has the ``approvals.UpgradeRequest`` that asks for it.
    """

    kind = models.CharField(_("kind"), max_length=32, choices=GrantKind.choices)
    tier = models.ForeignKey(
        PriorityTier,
        verbose_name=_("tier"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="%(class)ss",
        help_text=_("Priority upgrades and queue jumps: the tier granted."),
    )
    pool = models.ForeignKey(
        Pool,
        verbose_name=_("pool"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="%(class)ss",
    )
    flavor = models.ForeignKey(
        GpuFlavor,
        verbose_name=_("flavor"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="%(class)ss",
    )
    extra_gpus = models.PositiveIntegerField(
        _("extra GPUs"),
        null=True,
        blank=True,
        help_text=_("Quota exceptions: GPUs added to the maximum (guarantee + borrow limit)."),
    )
    lift_borrow_limit = models.BooleanField(
        _("lift the borrow limit"),
        default=False,
        help_text=_("Quota exceptions: borrow without limit inside the pool."),
    )
    preemption_class = models.ForeignKey(
        PreemptionClass,
        verbose_name=_("preemption class"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="%(class)ss",
        help_text=_("Preemption protection: the stricter class the workloads get."),
    )
    job_ids = models.JSONField(
        _("scheduler job ids"),
        default=list,
        blank=True,
        help_text=_("Named jobs only; empty means all of the project's work."),
    )
    starts_at = models.DateTimeField(_("starts at"))
    ends_at = models.DateTimeField(_("ends at"))

    class Meta:
        abstract = True
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=GrantKind.values), name="%(app_label)s_%(class)s_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(ends_at__gt=F("starts_at")),
                name="%(app_label)s_%(class)s_ends_after_start",
            ),
            models.CheckConstraint(
                condition=~Q(kind__in=TIER_KINDS) | Q(tier__isnull=False),
                name="%(app_label)s_%(class)s_tier_needed",
            ),
            models.CheckConstraint(
                condition=~Q(kind=GrantKind.QUOTA_EXCEPTION)
                | (
                    Q(pool__isnull=False, flavor__isnull=False)
                    & (Q(extra_gpus__gt=0) | Q(lift_borrow_limit=True))
                ),
                name="%(app_label)s_%(class)s_quota_exception_complete",
            ),
            models.CheckConstraint(
                condition=~Q(kind=GrantKind.PREEMPTION_PROTECTION)
                | Q(preemption_class__isnull=False),
                name="%(app_label)s_%(class)s_protection_class_needed",
            ),
        ]

    def terms_errors(self) -> dict[str, str]:
        """What is wrong with the terms on their own: the fields the kind needs and uses."""
        errors: dict[str, str] = {}
        if self.starts_at and self.ends_at and self.ends_at <= self.starts_at:
            errors["ends_at"] = gettext("The end must come after the start.")
        if self.kind not in GrantKind.values:
            errors["kind"] = gettext("Choose a kind of request.")
            return errors
        kind = GrantKind(self.kind)
        used = KIND_TERMS[kind]
        unused = gettext("A %(kind)s does not use this field.") % {"kind": kind.label.lower()}
        for name, empty in KIND_SPECIFIC_TERMS.items():
            value = getattr(self, f"{name}_id" if name in _RELATIONS else name)
            if name not in used and value not in (None, empty):
                errors[name] = unused
        if kind in TIER_KINDS and not self.tier_id:
            errors["tier"] = gettext("Say which tier the work should run at.")
        if kind == GrantKind.QUEUE_JUMP and not self.job_ids:
            errors["job_ids"] = gettext("A queue jump names the pending jobs it raises.")
        if kind == GrantKind.QUOTA_EXCEPTION:
            if not (self.pool_id and self.flavor_id):
                errors["pool"] = gettext("A quota exception names a pool and a flavor.")
            if self.lift_borrow_limit and self.extra_gpus:
                errors["extra_gpus"] = gettext(
                    "Either add GPUs or lift the borrow limit, not both."
                )
            elif not (self.extra_gpus or self.lift_borrow_limit):
                errors["extra_gpus"] = gettext(
                    "Say how many GPUs to add, or lift the borrow limit."
                )
        if kind == GrantKind.PREEMPTION_PROTECTION and not self.preemption_class_id:
            errors["preemption_class"] = gettext(
                "Say which preemption class should protect the work."
            )
        if not isinstance(self.job_ids, list) or not all(
            isinstance(job, str) and job.strip() for job in self.job_ids
        ):
            errors["job_ids"] = gettext("Job ids must be a list of non-empty strings.")
        return errors

    def clean(self) -> None:
        errors = self.terms_errors()
        if errors:
            raise ValidationError(errors)

    @property
    def terms(self) -> "Terms":
        return Terms.of(self)


_RELATIONS = ("tier", "pool", "flavor", "preemption_class")


@dataclass(frozen=True, kw_only=True)
class Terms:
    """The terms of a grant as a value: what a request asks for and a grant gives.

    ``request_create`` and ``grant_create`` take one; approving a request passes the
    request's terms on to its grant (``Terms.of(request)``).
    """

    kind: str
    starts_at: datetime
    ends_at: datetime
    tier: PriorityTier | None = None
    pool: Pool | None = None
    flavor: GpuFlavor | None = None
    extra_gpus: int | None = None
    lift_borrow_limit: bool = False
    preemption_class: PreemptionClass | None = None
    job_ids: tuple[str, ...] = ()

    @classmethod
    def of(cls, obj: Any) -> "Terms":
        """The terms of a grant or a request (or of any object with the same attributes)."""
        return cls.from_data({name: getattr(obj, name) for name in TERM_FIELDS})

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> "Terms":
        """The terms among ``data`` (e.g. a form's or a serializer's cleaned data)."""
        values = {name: data[name] for name in TERM_FIELDS if name in data}
        values["job_ids"] = tuple(values.get("job_ids") or ())
        return cls(**values)

    def fields(self) -> dict[str, Any]:
        """The model field values (``job_ids`` as a list)."""
        values = {name: getattr(self, name) for name in TERM_FIELDS}
        values["job_ids"] = list(self.job_ids)
        return values

    def replace(self, **changes: Any) -> "Terms":
        return dataclasses.replace(self, **changes)


class Grant(GrantTerms):
    """An approved, time-boxed change of the effective rules (created from a request).

    Whether a grant applies at an instant depends only on ``starts_at``, ``ends_at`` and
    ``revoked_at``; ``state`` records the transitions that the beat task has carried out
    (and the scheduler syncs they triggered).
    """

    project = models.ForeignKey(
        Project, verbose_name=_("project"), on_delete=models.PROTECT, related_name="grants"
    )
    state = models.CharField(
        _("state"), max_length=16, choices=GrantState.choices, default=GrantState.SCHEDULED
    )
    source = models.CharField(
        _("source"), max_length=100, blank=True, help_text=_("What it came from, e.g. a request.")
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    revoked_at = models.DateTimeField(_("revoked at"), null=True, blank=True)
    history = HistoricalRecords()

    class Meta(GrantTerms.Meta):
        ordering = ["-starts_at", "-pk"]
        verbose_name = _("grant")
        verbose_name_plural = _("grants")
        indexes = [models.Index(fields=["starts_at", "ends_at"], name="grant_window")]
        constraints = [
            *GrantTerms.Meta.constraints,
            models.CheckConstraint(
                condition=Q(state__in=GrantState.values), name="grant_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} · {self.project} · {self.starts_at:%Y-%m-%d %H:%M}"

    def is_active_at(self, at: datetime) -> bool:
        return grant_in_force(
            starts_at=self.starts_at, ends_at=self.ends_at, revoked_at=self.revoked_at, at=at
        )


class RevisionTrigger(models.TextChoices):
    RULE_CHANGE = "rule_change", _("Rule change applied")
    GRANT_STARTED = "grant_started", _("Grant started")
    GRANT_ENDED = "grant_ended", _("Grant ended")
    MANUAL = "manual", _("Manual")


class RulesRevision(models.Model):
    """One row each time the effective rules change: the scheduler sync is due from here.

    A cluster is in sync when it has applied the newest revision; nothing is lost while a
    scheduler is down, because the revisions wait here until a sync succeeds.
    """

    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    trigger = models.CharField(_("trigger"), max_length=32, choices=RevisionTrigger.choices)
    note = models.CharField(_("note"), max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("by"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        ordering = ["-pk"]
        verbose_name = _("rules revision")
        verbose_name_plural = _("rules revisions")
        constraints = [
            models.CheckConstraint(
                condition=Q(trigger__in=RevisionTrigger.values), name="revision_trigger_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.get_trigger_display()}"
