"""One placement answer, from the compiled organisation and the one query of the request."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.http import Http404
from django.utils import timezone
from django.utils.translation import get_language
from django.utils.translation import gettext as _

from governance.models import (
    ApiToken,
    GpuFlavor,
    PriorityTier,
    Project,
)
from governance.selectors import (
    EffectiveProject,
    EffectiveQuota,
    quota_maximum,
    user_can_read_rules,
)
from queues.models import WorkloadJob

from .. import definitions
from . import compiled as cache
from .compiled import FINGERPRINT_SIZE, Compiled, _current, _read, read_with_token
from .routes import (
    _routes,
)

# At most this many answers are kept per compiled rules (each a few hundred bytes).
ANSWERS_KEPT = 20_000


class Refusal:
    """Why a placement is not allowed right now (codes are part of the API)."""

    TIER_NOT_ALLOWED = "tier_not_allowed"
    TIER_RETIRED = "tier_retired"
    OVER_JOB_CAP = "over_job_cap"
    OVER_MAXIMUM = "over_maximum"
    UNKNOWN_FLAVOR = "unknown_flavor"
    NO_QUOTA = "no_quota"
    NO_TIER = "no_tier"
    NO_CLUSTER = "no_cluster"

    CODES = (
        TIER_NOT_ALLOWED,
        TIER_RETIRED,
        OVER_JOB_CAP,
        OVER_MAXIMUM,
        UNKNOWN_FLAVOR,
        NO_QUOTA,
        NO_TIER,
        NO_CLUSTER,
    )


class PlacementInputError(ValueError):
    """A parameter the caller must fix (a 400 naming it)."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__(errors)
        self.errors = errors


# --- one answer -------------------------------------------------------------------------------


def _refusal(code: str, detail: str) -> dict[str, str]:
    return {"code": code, "detail": detail}


def _running_gpus(project: Project, flavor_id: int | None) -> tuple[float, float]:
    """GPUs the project's running jobs hold of ``flavor_id``, and without a flavor (fractions
    kept: ``definitions.running_gpus``)."""
    running = definitions.running_gpus(
        WorkloadJob.objects.filter(project=project), by=("flavor_id",)
    )
    return running.get((flavor_id,), 0.0), running.get((None,), 0.0)


def _flavor_guess(compiled: Compiled | None, slug: str, flavor: str | None) -> int | None:
    """The flavor the answer will be about, as far as the last compiled rules tell."""
    if compiled is None:
        return None
    if flavor:
        known = compiled.flavors.get(flavor)
        return known.pk if known else None
    effective = compiled.projects.get(slug)
    ids = {q.quota.flavor_id for q in effective.quotas} if effective else set()
    return next(iter(ids)) if len(ids) == 1 else None


def _tier_out(tier: PriorityTier | None) -> dict[str, Any] | None:
    if tier is None:
        return None
    return {
        "slug": tier.slug,
        "name": tier.name,
        "scheduler_value": tier.scheduler_value,
        "max_gpus_per_job": tier.max_gpus_per_job,
    }


def placement(
    *,
    project: Project,
    gpus: int,
    tier: str | None = None,
    flavor: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Where and how ``project`` submits ``gpus`` GPUs of ``flavor`` at ``tier``, and whether
    it may right now (``refusals`` say why not). Raises ``PlacementInputError`` for a tier or
    flavor that does not exist, or a missing flavor the project's quotas do not settle."""
    now = now or timezone.now()
    guess = _flavor_guess(cache._compiled, project.slug, flavor)
    row = _read(project.pk, guess)
    compiled = _current(row[:FINGERPRINT_SIZE], now)
    return _answer(compiled, row, guess, project, gpus, tier, flavor, now)


@dataclass(frozen=True)
class PreRead:
    """What ``placement_for`` reads per request, read already (with the caller's token, in
    one query: ``token_read_placement``) for the question ``project`` × ``flavor``."""

    project: str
    flavor: str | None
    guess: int | None
    row: tuple[Any, ...]


def token_read_placement(
    *, prefix: str, project: str, flavor: str | None
) -> tuple[ApiToken, PreRead] | None:
    """The API token whose prefix is ``prefix`` and, in the same query, what ``placement_for``
    reads for ``project`` and ``flavor`` (the hot path makes one query: the token's
    authentication and its placement answer share it). ``None``: no token has that prefix."""
    guess = _flavor_guess(cache._compiled, project, flavor)
    found = read_with_token(prefix=prefix, slug=project, flavor_id=guess)
    if found is None:
        return None
    token, row = found
    return token, PreRead(project=project, flavor=flavor, guess=guess, row=row)


def placement_for(
    *,
    user: Any,
    project: str,
    gpus: int,
    tier: str | None = None,
    flavor: str | None = None,
    now: datetime | None = None,
    read: PreRead | None = None,
) -> dict[str, Any]:
    """``placement`` of the project whose slug is ``project``, as ``user`` sees it: a 404
    when it does not exist or ``user`` may not read the rules (as the scoped getter
    ``project_get`` decides). The project comes from the compiled rules, checked by the
    same one query that reads the fingerprint and the running GPUs (the API's hot path;
    ``read``: that query's row, read with the caller's token, when it was of this question)."""
    if not user_can_read_rules(user):
        raise Http404
    now = now or timezone.now()
    if read is not None and (read.project, read.flavor) == (project, flavor):
        guess, row = read.guess, read.row
    else:
        guess = _flavor_guess(cache._compiled, project, flavor)
        row = _read(None, guess, slug=project)
    compiled = _current(row[:FINGERPRINT_SIZE], now)
    effective = compiled.projects.get(project)
    if effective is None:
        raise Http404
    # An answer is a function of the compiled rules, the question, the running GPUs read
    # just now, the day (tier retirement) and the language (refusal texts): the same ones
    # give the same answer, at another instant.
    key = (project, gpus, tier, flavor, guess, row[-2], row[-1], get_language(), now.date())
    known = compiled.answers.get(key)
    if known is not None:
        return {**known, "at": now}
    answer = _answer(compiled, row, guess, effective.project, gpus, tier, flavor, now)
    chosen = answer["flavor"]
    # Kept unless the running GPUs were read again for a flavor the guess missed.
    if (chosen is None or compiled.flavors[chosen["slug"]].pk == guess) and len(
        compiled.answers
    ) < ANSWERS_KEPT:
        compiled.answers[key] = answer
    return answer


def _answer(
    compiled: Compiled,
    row: tuple[Any, ...],
    guess: int | None,
    project: Project,
    gpus: int,
    tier: str | None,
    flavor: str | None,
    now: datetime,
) -> dict[str, Any]:
    # The prepared query's sums of GPUs running (``definitions.running_gpus``), fractions kept.
    running_typed, untyped_running = float(row[-2] or 0), float(row[-1] or 0)
    effective = compiled.projects.get(project.slug)
    quotas = list(effective.quotas) if effective is not None else []
    project_flavors = sorted(
        {q.quota.flavor.slug: q.quota.flavor for q in quotas}.values(), key=lambda f: f.slug
    )
    chosen_tier, chosen_flavor = _chosen(compiled, effective, project_flavors, tier, flavor)
    allowed_tiers = list(effective.allowed_tiers) if effective is not None else []
    refusals = _tier_refusals(chosen_tier, effective, allowed_tiers, project, gpus, now)
    if chosen_flavor is not None and chosen_flavor.pk != guess:
        # The rules were compiled anew and name another flavor: read its jobs (rare).
        running_typed, untyped_running = _running_gpus(project, chosen_flavor.pk)
    # Jobs reported without a flavor hold the project's only flavor, if it has one.
    used = running_typed + (untyped_running if len(project_flavors) == 1 else 0)
    flavor_quotas, headroom, more = _headroom(
        compiled, quotas, project, chosen_flavor, used=used, gpus=gpus
    )
    refusals += more
    slurm_routes, kueue_routes = _routes(
        compiled, project.slug, chosen_tier, chosen_flavor, flavor_quotas, gpus
    )
    if flavor_quotas and not slurm_routes and not kueue_routes:
        refusals.append(
            _refusal(
                Refusal.NO_CLUSTER,
                _("No enabled cluster serves the pools of the project's %(flavor)s quota.")
                % {"flavor": chosen_flavor.slug if chosen_flavor else ""},
            )
        )
    grants = effective.grants if effective is not None else ()
    return {
        "project": project.slug,
        "gpus": gpus,
        "tier": _tier_out(chosen_tier),
        "tier_given": bool(tier),
        "flavor": None
        if chosen_flavor is None
        else {
            "slug": chosen_flavor.slug,
            "name": chosen_flavor.name,
            "gres_type": chosen_flavor.gres_type,
        },
        "at": now,
        "rules_revision": compiled.revision,
        "allowed": not refusals,
        "refusals": refusals,
        "project_tier": effective.tier.slug if effective and effective.tier else None,
        "allowed_tiers": [t.slug for t in allowed_tiers],
        "headroom": headroom,
        "untyped_running_gpus": untyped_running,
        "grants": [
            {"id": g.pk, "kind": g.kind, "starts_at": g.starts_at, "ends_at": g.ends_at}
            for g in grants
        ],
        "slurm": slurm_routes,
        "kubernetes": kueue_routes,
    }


def _chosen(
    compiled: Compiled,
    effective: EffectiveProject | None,
    project_flavors: list[GpuFlavor],
    tier: str | None,
    flavor: str | None,
) -> tuple[PriorityTier | None, GpuFlavor | None]:
    """The tier and flavor asked for, or the project's own; ``PlacementInputError`` naming
    what does not exist or must be chosen."""
    errors: dict[str, str] = {}
    chosen_tier: PriorityTier | None = None
    if tier:
        chosen_tier = compiled.tiers.get(tier)
        if chosen_tier is None:
            errors["tier"] = _("No tier named “%(slug)s”.") % {"slug": tier}
    elif effective is not None:
        chosen_tier = effective.tier
    chosen_flavor: GpuFlavor | None = None
    if flavor:
        chosen_flavor = compiled.flavors.get(flavor)
        if chosen_flavor is None:
            errors["flavor"] = _("No GPU flavor named “%(slug)s”.") % {"slug": flavor}
    elif len(project_flavors) == 1:
        chosen_flavor = project_flavors[0]
    elif len(project_flavors) > 1:
        errors["flavor"] = _(
            "The project has quotas of several flavors (%(flavors)s): choose one."
        ) % {"flavors": ", ".join(f.slug for f in project_flavors)}
    if errors:
        raise PlacementInputError(errors)
    return chosen_tier, chosen_flavor


def _tier_refusals(
    chosen_tier: PriorityTier | None,
    effective: EffectiveProject | None,
    allowed_tiers: list[PriorityTier],
    project: Project,
    gpus: int,
    now: datetime,
) -> list[dict[str, str]]:
    """Why the tier refuses the job: none, retired, not the project's, over its per-job cap."""
    refusals: list[dict[str, str]] = []
    if chosen_tier is None:
        refusals.append(
            _refusal(Refusal.NO_TIER, _("No tier was given and the project has no tier."))
        )
    else:
        if chosen_tier.retired_on is not None and chosen_tier.retired_on <= now.date():
            refusals.append(
                _refusal(
                    Refusal.TIER_RETIRED,
                    _("Tier %(tier)s was retired on %(date)s.")
                    % {"tier": chosen_tier.slug, "date": chosen_tier.retired_on.isoformat()},
                )
            )
        if chosen_tier not in allowed_tiers:
            top = effective.tier if effective is not None else None
            refusals.append(
                _refusal(
                    Refusal.TIER_NOT_ALLOWED,
                    _(
                        "Project %(project)s may not submit at tier %(tier)s: its highest "
                        "tier is %(top)s."
                    )
                    % {
                        "project": project.slug,
                        "tier": chosen_tier.slug,
                        "top": top.slug if top else _("none"),
                    },
                )
            )
        cap = chosen_tier.max_gpus_per_job
        if cap and gpus > cap:
            refusals.append(
                _refusal(
                    Refusal.OVER_JOB_CAP,
                    _("Tier %(tier)s allows at most %(cap)d GPUs per job; %(gpus)d asked.")
                    % {"tier": chosen_tier.slug, "cap": cap, "gpus": gpus},
                )
            )
    return refusals


def _headroom(
    compiled: Compiled,
    quotas: list[EffectiveQuota],
    project: Project,
    chosen_flavor: GpuFlavor | None,
    *,
    used: float,
    gpus: int,
) -> tuple[list[EffectiveQuota], dict[str, Any] | None, list[dict[str, str]]]:
    """The project's quotas of the flavor, its headroom under them, and why they refuse."""
    refusals: list[dict[str, str]] = []
    headroom: dict[str, Any] | None = None
    flavor_quotas: list[EffectiveQuota] = []
    if chosen_flavor is None:
        refusals.append(
            _refusal(
                Refusal.NO_QUOTA,
                _("Project %(project)s has no GPU quota.") % {"project": project.slug},
            )
        )
    else:
        flavor_quotas = [q for q in quotas if q.quota.flavor_id == chosen_flavor.pk]
        if not flavor_quotas:
            refusals.append(
                _refusal(
                    Refusal.UNKNOWN_FLAVOR,
                    _("Project %(project)s has no quota of flavor %(flavor)s.")
                    % {"project": project.slug, "flavor": chosen_flavor.slug},
                )
            )
        else:
            guarantee = sum(q.guarantee for q in flavor_quotas)
            maximum = sum(quota_maximum(q, compiled.capacities) for q in flavor_quotas)
            headroom = {
                "flavor": chosen_flavor.slug,
                "running_gpus": used,
                "guarantee": guarantee,
                "maximum": maximum,
                "borrow_limit_lifted": any(q.borrow_limit is None for q in flavor_quotas),
                "under_guarantee": max(guarantee - used, 0),
                "under_maximum": max(maximum - used, 0),
                "within_guarantee": used + gpus <= guarantee,
                "changed_by_grants": sorted(
                    {grant.pk for q in flavor_quotas for grant in q.grants}
                ),
            }
            if used + gpus > maximum:
                refusals.append(
                    _refusal(
                        Refusal.OVER_MAXIMUM,
                        _(
                            "Project %(project)s runs %(used)d of its maximum %(maximum)d "
                            "%(flavor)s GPUs: %(gpus)d more would go over it."
                        )
                        % {
                            "project": project.slug,
                            "used": used,
                            "maximum": maximum,
                            "flavor": chosen_flavor.slug,
                            "gpus": gpus,
                        },
                    )
                )
    return flavor_quotas, headroom, refusals
