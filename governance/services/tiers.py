from collections.abc import Iterable
from datetime import date
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import Grant, GrantState, PriorityTier, Project, Quota, User

from ._access import require_ops
from ._history import apply_fields, governed_save

# The seeds: alert when a critical job waits longer than 10 minutes.
DEFAULT_WAIT_ALERT_MINUTES = 10

TIER_EDITABLE = (
    "name",
    "score",
    "scheduler_value",
    "description",
    "owner",
    "eligibility",
    "confirmed_by",
    "max_gpus_per_job",
    "max_gpus_total",
    "may_preempt",
    "aging_after_minutes",
    "aging_step",
    "aging_cap",
    "after_grant",
    "review_cycle_days",
    "wait_alert_minutes",
    "last_reviewed_on",
    "is_default",
    "retired_on",
)


def _tiers_lock() -> dict[int, PriorityTier]:
    """Lock every tier: the cross-tier rules (default, preemption, aging) read them all."""
    return {tier.pk: tier for tier in PriorityTier.objects.select_for_update().order_by("pk")}


def _victims(tier: PriorityTier) -> list[PriorityTier]:
    return list(tier.preemptible_tiers.all())


def _check_tier_rules(*, tier: PriorityTier, victims: list[PriorityTier]) -> None:
    """The rules that span tiers, checked with every tier locked.

    - one tier is the default;
    - a tier preempts only lower tiers, and only if it may preempt at all;
    - aging raises a job above its tier but never to (or past) a tier that may preempt.
    """
    tiers = {pk: t for pk, t in _tiers_lock().items() if pk != tier.pk}
    tiers[tier.pk] = tier
    errors: dict[str, list[str]] = {}

    def add(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    if not any(t.is_default for t in tiers.values()):
        add("is_default", _("One tier must be the default: make another tier the default first."))

    if victims and not tier.may_preempt:
        add("preemptible_tiers", _("Only a tier that may preempt can name tiers to preempt."))
    for victim in victims:
        if victim.pk == tier.pk or victim.score >= tier.score:
            add(
                "preemptible_tiers",
                _(
                    "“%(victim)s” (score %(victim_score)d) is not below “%(tier)s” (score "
                    "%(score)d): a tier preempts only lower tiers."
                )
                % {
                    "victim": victim.name,
                    "victim_score": victim.score,
                    "tier": tier.name,
                    "score": tier.score,
                },
            )

    preempting = [t for t in tiers.values() if t.may_preempt]
    for aging in tiers.values():
        if aging.aging_cap_id is None:
            continue
        cap = tiers[aging.aging_cap_id]
        field = "aging_cap" if aging.pk == tier.pk else "may_preempt"
        if cap.score <= aging.score and aging.pk == tier.pk:
            add(
                "aging_cap",
                _(
                    "The aging cap “%(cap)s” (score %(cap_score)d) must be above "
                    "this tier (score %(score)d)."
                )
                % {"cap": cap.name, "cap_score": cap.score, "score": aging.score},
            )
        for strong in preempting:
            if cap.score >= strong.score:
                add(
                    field,
                    _(
                        "Aging of “%(tier)s” may reach “%(cap)s” (score %(cap_score)d), "
                        "which is not below “%(strong)s” (score %(strong_score)d), a tier "
                        "that may preempt. Aging must never let a job preempt."
                    )
                    % {
                        "tier": aging.name,
                        "cap": cap.name,
                        "cap_score": cap.score,
                        "strong": strong.name,
                        "strong_score": strong.score,
                    },
                )
    if errors:
        raise ValidationError(errors)


def _check_retirement(tier: PriorityTier) -> None:
    """A tier retires only when nothing uses it: no project, grant, default or other tier."""
    users: list[str] = []
    if tier.is_default:
        users.append(_("it is the default tier"))
    projects = list(
        Project.objects.filter(tier=tier).order_by("name").values_list("name", flat=True)
    )
    if projects:
        users.append(_("projects use it: %(names)s") % {"names": ", ".join(projects)})
    grants = Grant.objects.filter(
        tier=tier, state__in=[GrantState.SCHEDULED, GrantState.ACTIVE]
    ).count()
    if grants:
        users.append(_("%(count)d grants give it") % {"count": grants})
    quotas = Quota.objects.filter(project__tier=tier).count()
    if quotas:
        users.append(_("%(count)d quotas run at it") % {"count": quotas})
    others = list(
        PriorityTier.objects.filter(Q(aging_cap=tier) | Q(preemptible_tiers=tier))
        .exclude(pk=tier.pk)
        .distinct()
        .order_by("name")
        .values_list("name", flat=True)
    )
    if others:
        users.append(_("other tiers name it: %(names)s") % {"names": ", ".join(others)})
    if users:
        raise ValidationError(
            {
                "retired_on": _("“%(tier)s” cannot retire while it is used: %(uses)s.")
                % {"tier": tier.name, "uses": "; ".join(users)}
            }
        )


def _unset_other_defaults(*, tier: PriorityTier, user: User, reason: str) -> None:
    for other in PriorityTier.objects.filter(is_default=True).exclude(pk=tier.pk):
        other.is_default = False
        governed_save(other, user=user, reason=reason)


def _schedule_review(tier: PriorityTier, today: date) -> None:
    tier.next_review_on = tier.review_due_from(tier.last_reviewed_on or today)


@transaction.atomic
def tier_create(
    *,
    user: User,
    reason: str,
    slug: str,
    name: str,
    score: int,
    scheduler_value: int,
    owner: User,
    eligibility: str,
    confirmed_by: str,
    review_cycle_days: int,
    description: str = "",
    max_gpus_per_job: int | None = None,
    max_gpus_total: int | None = None,
    may_preempt: bool = False,
    preemptible_tiers: Iterable[PriorityTier] = (),
    aging_after_minutes: int | None = None,
    aging_step: int | None = None,
    aging_cap: PriorityTier | None = None,
    after_grant: str = "keep",
    last_reviewed_on: date | None = None,
    is_default: bool = False,
    wait_alert_minutes: int | None = None,
) -> PriorityTier:
    require_ops(user)
    _tiers_lock()
    tier = PriorityTier(
        slug=slug,
        name=name,
        score=score,
        scheduler_value=scheduler_value,
        owner=owner,
        eligibility=eligibility,
        confirmed_by=confirmed_by,
        review_cycle_days=review_cycle_days,
        description=description,
        max_gpus_per_job=max_gpus_per_job,
        max_gpus_total=max_gpus_total,
        may_preempt=may_preempt,
        aging_after_minutes=aging_after_minutes,
        aging_step=aging_step,
        aging_cap=aging_cap,
        after_grant=after_grant,
        last_reviewed_on=last_reviewed_on,
        is_default=is_default,
        wait_alert_minutes=(
            DEFAULT_WAIT_ALERT_MINUTES
            if wait_alert_minutes is None and may_preempt
            else wait_alert_minutes
        ),
    )
    if not PriorityTier.objects.exists():
        tier.is_default = True
    if review_cycle_days:
        _schedule_review(tier, timezone.localdate())
    if tier.is_default:
        _unset_other_defaults(tier=tier, user=user, reason=reason)
    victims = list(preemptible_tiers)
    _check_tier_rules(tier=tier, victims=victims)
    governed_save(tier, user=user, reason=reason)
    if victims:
        tier.preemptible_tiers.set(victims)  # a second history row: the tiers it preempts
    return tier


@transaction.atomic
def tier_update(
    *, tier: PriorityTier, user: User, reason: str, data: dict[str, Any]
) -> PriorityTier:
    """Change a tier. ``data`` may hold ``preemptible_tiers`` (an iterable of tiers)."""
    require_ops(user)
    _tiers_lock()
    tier = PriorityTier.objects.get(pk=tier.pk)
    data = dict(data)
    old_victims = _victims(tier)
    victims = list(data.pop("preemptible_tiers", old_victims))
    changed = apply_fields(tier, data, TIER_EDITABLE)
    victims_changed = {v.pk for v in victims} != {v.pk for v in old_victims}
    if not changed and not victims_changed:
        return tier
    if {"review_cycle_days", "last_reviewed_on"} & set(changed):
        _schedule_review(tier, timezone.localdate())
    if tier.is_default:
        _unset_other_defaults(tier=tier, user=user, reason=reason)
    _check_tier_rules(tier=tier, victims=victims)
    if "retired_on" in changed and tier.retired_on is not None:
        _check_retirement(tier)
    tier.full_clean()
    if victims_changed:
        # Change the relation without its own history row; the save below records it.
        tier.skip_history_when_saving = True  # type: ignore[attr-defined]
        try:
            tier.preemptible_tiers.set(victims)
        finally:
            del tier.skip_history_when_saving  # type: ignore[attr-defined]
    governed_save(tier, user=user, reason=reason)
    return tier
