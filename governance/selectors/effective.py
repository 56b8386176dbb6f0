"""The effective rules at an instant: the stored rules plus the grants active then.

This is the one function that pages, the API and the scheduler sync read rules through. It
is a pure function of the database and ``at``: a grant applies while it is in force
(``governance.models.grant_in_force``).
"""

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from governance.models import (
    GpuFlavor,
    Grant,
    GrantKind,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PreemptionKind,
    PriorityTier,
    Project,
    Quota,
    grant_in_force_q,
)

# How strict a preemption class is: protection grants only ever make it stricter.
STRICTNESS = {PreemptionKind.ALLOWED: 0, PreemptionKind.CAUTIOUS: 1, PreemptionKind.FORBIDDEN: 2}


@dataclass(frozen=True)
class EffectiveQuota:
    quota: Quota
    guarantee: int
    borrow_limit: int | None
    lending_limit: int | None
    preemption_class: PreemptionClass
    grants: tuple[Grant, ...] = ()

    @property
    def maximum(self) -> int | None:
        """Guarantee + borrow limit; ``None`` without a borrow limit (``quota_maximum`` gives
        the GPUs that means)."""
        return None if self.borrow_limit is None else self.guarantee + self.borrow_limit

    @property
    def changed_by_grants(self) -> bool:
        return bool(self.grants)


@dataclass(frozen=True)
class EffectiveProject:
    project: Project
    tier: PriorityTier | None
    allowed_tiers: tuple[PriorityTier, ...]
    quotas: tuple[EffectiveQuota, ...]
    # Named jobs raised by upgrades and queue jumps, and named jobs' stricter classes.
    job_tiers: dict[str, PriorityTier] = field(default_factory=dict)
    job_preemption_classes: dict[str, PreemptionClass] = field(default_factory=dict)
    grants: tuple[Grant, ...] = ()


@dataclass(frozen=True)
class EffectiveRules:
    at: datetime
    tiers: tuple[PriorityTier, ...]
    default_tier: PriorityTier | None
    projects: dict[str, EffectiveProject]
    grants: tuple[Grant, ...]

    @property
    def quotas(self) -> list[EffectiveQuota]:
        return [quota for project in self.projects.values() for quota in project.quotas]


def pool_capacities() -> dict[tuple[int, int], int]:
    """The GPUs of each (pool id, flavor id) (one query)."""
    return {
        (pool_id, flavor_id): gpus
        for pool_id, flavor_id, gpus in PoolCapacity.objects.values_list(
            "pool_id", "flavor_id", "gpus"
        )
    }


def quota_maximum(quota: EffectiveQuota, capacities: Mapping[tuple[int, int], int]) -> int:
    """The most GPUs ``quota`` may use: its guarantee plus its borrow limit; without a borrow
    limit, what its pool has of the flavor (never below its guarantee), as the schedulers
    bound it. The one definition: placement and the wait classifier read it here."""
    if quota.maximum is not None:
        return quota.maximum
    key = (quota.quota.pool_id, quota.quota.flavor_id)
    return max(capacities.get(key, 0), quota.guarantee)


def grants_active_at(*, at: datetime, project_ids: Collection[int] | None = None) -> list[Grant]:
    grants = (
        Grant.objects.all()
        if project_ids is None
        else Grant.objects.filter(project_id__in=project_ids)
    )
    return list(
        grants.filter(grant_in_force_q(at))
        .select_related("project", "tier", "pool", "flavor", "preemption_class")
        .order_by("starts_at", "pk")
    )


def _quotas(project_ids: list[int] | None) -> list[Quota]:
    """The quotas of ``project_ids`` (None: all) with their pool, flavor and class.

    All quotas share one instance per pool, flavor and preemption class, each read once
    (three small queries): one copy of each per row, as ``select_related`` makes, took
    two thirds of the time at 10,000 projects. A few projects' quotas come with them.
    """
    rows = Quota.objects.order_by("pool__name", "flavor__name", "pk")
    if project_ids is not None:
        rows = rows.filter(project_id__in=project_ids)
        return list(rows.select_related("pool", "flavor", "preemption_class"))
    return _loaded(
        rows,
        pool=Pool.objects.in_bulk(),
        flavor=GpuFlavor.objects.in_bulk(),
        preemption_class=PreemptionClass.objects.in_bulk(),
    )


M = TypeVar("M", bound=Model)


def _loaded(rows: QuerySet[M], **related: Mapping[Any, Model]) -> list[M]:
    """The rows of ``rows`` as model instances, each foreign key named in ``related`` given
    its object from there (by id; ``None`` when it has none) as ``select_related`` caches it
    (no query when it is read).

    Each instance is what ``Model.from_db`` makes of its row (every concrete field loaded,
    ``_state`` not adding, of the rows' database), built from ``values_list`` without
    ``Model.__init__``'s call per field: at 10,000 projects and 20,000 quotas that call was
    half of reading the rules. ``__init__`` still builds them when something listens to the
    model's ``pre_init`` or ``post_init``, which it would not hear otherwise.
    """
    model = rows.model
    opts = model._meta
    keys = [
        (name, opts.get_field(name).attname, objects)  # type: ignore[union-attr]
        for name, objects in related.items()
    ]
    if pre_init.has_listeners(model) or post_init.has_listeners(model):
        instances = list(rows)
        for instance in instances:
            for name, attname, objects in keys:
                opts.get_field(name).set_cached_value(  # type: ignore[union-attr]
                    instance, objects.get(getattr(instance, attname))
                )
        return instances
    names = [f.attname for f in opts.concrete_fields]
    db = rows.db
    new = object.__new__
    instances = []
    for values in rows.values_list(*names):
        fields = dict(zip(names, values, strict=True))
        state = new(ModelState)
        state.__dict__.update(
            db=db,
            adding=False,
            fields_cache={name: objects.get(fields[attname]) for name, attname, objects in keys},
        )
        fields["_state"] = state
        instance = new(model)
        instance.__dict__ = fields
        instances.append(instance)
    return instances


def _stricter(a: PreemptionClass, b: PreemptionClass | None) -> PreemptionClass:
    if b is not None and STRICTNESS[PreemptionKind(b.kind)] > STRICTNESS[PreemptionKind(a.kind)]:
        return b
    return a


def _higher(a: PriorityTier | None, b: PriorityTier | None) -> PriorityTier | None:
    if a is None:
        return b
    if b is None:
        return a
    return b if b.score > a.score else a


def effective_rules(
    *, at: datetime, project_slugs: Collection[str] | None = None
) -> EffectiveRules:
    """The rules in force at ``at`` (seven queries, whatever the number of projects; four
    when ``project_slugs`` narrows the result to those projects, for one project's page or
    API). Projects share the instances of ``tiers``."""
    tiers = tuple(PriorityTier.objects.order_by("-score"))
    tier_of = {tier.pk: tier for tier in tiers}
    default = next((tier for tier in tiers if tier.is_default), None)
    project_rows = Project.objects.order_by("slug")
    if project_slugs is not None:
        project_rows = project_rows.filter(slug__in=project_slugs)
    project_list = _loaded(project_rows, tier=tier_of)
    project_ids = None if project_slugs is None else [project.pk for project in project_list]
    grants = grants_active_at(at=at, project_ids=project_ids)
    by_project: dict[int, list[Grant]] = {}
    for grant in grants:
        by_project.setdefault(grant.project_id, []).append(grant)
    quotas_by_project: dict[int, list[Quota]] = {}
    for quota in _quotas(project_ids):
        quotas_by_project.setdefault(quota.project_id, []).append(quota)

    projects: dict[str, EffectiveProject] = {}
    # The tiers allowed under each top tier (projects share a few).
    allowed_below: dict[int | None, tuple[PriorityTier, ...]] = {}
    for project in project_list:
        project_grants = by_project.get(project.pk, [])
        top, job_tiers, job_classes, protection = _grant_effects(
            project_grants, project.tier or default
        )
        quotas = _effective_quotas(
            quotas_by_project.get(project.pk, []), project_grants, protection
        )
        below = None if top is None else top.id
        allowed = allowed_below.get(below)
        if allowed is None:
            allowed = allowed_below[below] = tuple(
                tier for tier in tiers if top is not None and tier.score <= top.score
            )
        projects[project.slug] = EffectiveProject(
            project=project,
            tier=top,
            allowed_tiers=allowed,
            quotas=quotas,
            job_tiers=job_tiers,
            job_preemption_classes=job_classes,
            grants=tuple(project_grants),
        )
    return EffectiveRules(
        at=at, tiers=tiers, default_tier=default, projects=projects, grants=tuple(grants)
    )


def _grant_effects(
    grants: list[Grant], top: PriorityTier | None
) -> tuple[
    PriorityTier | None, dict[str, PriorityTier], dict[str, PreemptionClass], PreemptionClass | None
]:
    """What a project's active grants change beside its quotas: its tier (from ``top``), the
    tier and preemption class of named jobs, and the class protecting all its work."""
    job_tiers: dict[str, PriorityTier] = {}
    job_classes: dict[str, PreemptionClass] = {}
    protection: PreemptionClass | None = None
    for grant in grants:
        if grant.kind in (GrantKind.PRIORITY_UPGRADE, GrantKind.QUEUE_JUMP):
            if grant.job_ids and grant.tier is not None:
                for job in grant.job_ids:
                    job_tiers[job] = _higher(job_tiers.get(job), grant.tier) or grant.tier
            elif not grant.job_ids:
                top = _higher(top, grant.tier)
        elif grant.kind == GrantKind.PREEMPTION_PROTECTION and grant.preemption_class:
            if grant.job_ids:
                for job in grant.job_ids:
                    current = job_classes.get(job)
                    job_classes[job] = (
                        _stricter(current, grant.preemption_class)
                        if current
                        else grant.preemption_class
                    )
            else:
                protection = (
                    _stricter(protection, grant.preemption_class)
                    if protection
                    else grant.preemption_class
                )
    return top, job_tiers, job_classes, protection


def _effective_quotas(
    quotas: list[Quota], grants: list[Grant], protection: PreemptionClass | None
) -> tuple[EffectiveQuota, ...]:
    """A project's quotas as its active grants change them (borrow limits, protection)."""
    effective = []
    for quota in quotas:
        borrow = quota.borrow_limit
        touching = []
        for grant in grants:
            if (
                grant.kind == GrantKind.QUOTA_EXCEPTION
                and grant.pool_id == quota.pool_id
                and grant.flavor_id == quota.flavor_id
            ):
                touching.append(grant)
                if grant.lift_borrow_limit:
                    borrow = None
                elif borrow is not None:
                    borrow += grant.extra_gpus or 0
        if protection is not None:
            touching += [g for g in grants if g.preemption_class_id == protection.pk]
        effective.append(
            EffectiveQuota(
                quota=quota,
                guarantee=quota.guarantee,
                borrow_limit=borrow,
                lending_limit=quota.lending_limit,
                preemption_class=_stricter(quota.preemption_class, protection),
                grants=tuple(touching),
            )
        )
    return tuple(effective)
