"""Loading the demo organisation through the services, idempotently."""

from collections import Counter
from datetime import date, datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from governance.models import (
    GpuFlavor,
    Membership,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PriorityTier,
    Project,
    ProjectRole,
    Quota,
    User,
)

from ..flavors import flavor_create
from ..pools import pool_capacity_set, pool_create
from ..preemption import preemption_class_create
from ..projects import membership_set, project_create
from ..quotas import quota_create
from ..tiers import tier_create
from .changes import changes_ensure
from .clock import clock_at
from .data import (
    DEMO_EMAIL_DOMAIN,
    DEMO_PASSWORD,
    DEMO_REASON,
    FLAVORS,
    PEOPLE,
    POOLS,
    PREEMPTION_CLASSES,
    PROJECTS,
    QUOTAS,
    TIERS,
)
from .lock import demo_lock


def _users_ensure(*, password: str) -> tuple[dict[str, User], int]:
    users = {user.username: user for user in User.objects.filter(username__in=_usernames())}
    created = 0
    for username, first_name, last_name, site_role in PEOPLE:
        if username in users:
            continue
        users[username] = User.objects.create_user(
            username=username,
            password=password,
            email=f"{username}@{DEMO_EMAIL_DOMAIN}",
            first_name=first_name,
            last_name=last_name,
            site_role=site_role,
        )
        created += 1
    return users, created


# The demo organisation was set up this many days before it is loaded; its changes follow.
SET_UP_DAYS_AGO = 90


@transaction.atomic
def demo_seed(
    *, password: str = DEMO_PASSWORD, today: date | None = None, now: datetime | None = None
) -> dict[str, int]:
    """Load the demo organisation; return how many objects of each kind were created.

    The rules are dated as set up 90 days ago, and the rule changes over the weeks since.
    Runs started together load one after the other (``demo_lock``): the later finds it all."""
    demo_lock()
    now = now or timezone.now()
    today = today or timezone.localdate(now)
    with clock_at(now - timedelta(days=SET_UP_DAYS_AGO)):
        created = _organisation_ensure(password=password, today=today)
    users = {user.username: user for user in User.objects.filter(username__in=_usernames())}
    tiers = {tier.slug: tier for tier in PriorityTier.objects.all()}
    pools = {pool.slug: pool for pool in Pool.objects.all()}
    flavors = {flavor.slug: flavor for flavor in GpuFlavor.objects.all()}
    created["rule changes"] = changes_ensure(
        users=users, tiers=tiers, pools=pools, flavors=flavors, now=now
    )
    return {kind: count for kind, count in created.items() if count}


def _usernames() -> list[str]:
    return [username for username, *_ in PEOPLE]


def _organisation_ensure(*, password: str, today: date) -> Counter[str]:
    created: Counter[str] = Counter()
    users, created["users"] = _users_ensure(password=password)
    kw: dict[str, Any] = {"user": users["ops"], "reason": DEMO_REASON}
    flavors = _flavors_ensure(kw=kw, created=created)
    pools = _pools_ensure(kw=kw, flavors=flavors, created=created)
    tiers = _tiers_ensure(kw=kw, users=users, today=today, created=created)
    classes = _classes_ensure(kw=kw, users=users, created=created)
    projects = _projects_ensure(kw=kw, users=users, tiers=tiers, created=created)
    _quotas_ensure(
        kw=kw,
        projects=projects,
        pools=pools,
        flavors=flavors,
        classes=classes,
        today=today,
        created=created,
    )
    return created


# Each step below creates the demo rows of one kind that are missing (``kw``: the user and
# reason of the history rows), counts them in ``created`` and returns all rows by slug.


def _flavors_ensure(*, kw: dict[str, Any], created: Counter[str]) -> dict[str, GpuFlavor]:
    flavors = {flavor.slug: flavor for flavor in GpuFlavor.objects.all()}
    for spec in FLAVORS:
        if spec["slug"] not in flavors:
            flavors[spec["slug"]] = flavor_create(**kw, **spec)
            created["flavors"] += 1
    return flavors


def _pools_ensure(
    *, kw: dict[str, Any], flavors: dict[str, GpuFlavor], created: Counter[str]
) -> dict[str, Pool]:
    """The pools and their capacities."""
    pools = {pool.slug: pool for pool in Pool.objects.all()}
    capacities = set(PoolCapacity.objects.values_list("pool__slug", "flavor__slug"))
    for pool_spec in POOLS:
        spec = dict(pool_spec)
        capacity = spec.pop("capacity")
        slug = spec["slug"]
        if slug not in pools:
            pools[slug] = pool_create(**kw, **spec)
            created["pools"] += 1
        for flavor_slug, gpus in capacity.items():
            if (slug, flavor_slug) not in capacities:
                pool_capacity_set(**kw, pool=pools[slug], flavor=flavors[flavor_slug], gpus=gpus)
                created["pool capacities"] += 1
    return pools


def _tiers_ensure(
    *, kw: dict[str, Any], users: dict[str, User], today: date, created: Counter[str]
) -> dict[str, PriorityTier]:
    tiers = {tier.slug: tier for tier in PriorityTier.objects.all()}
    for tier_spec in TIERS:
        spec = dict(tier_spec)
        if spec["slug"] in tiers:
            continue
        spec["owner"] = users[spec["owner"]]
        spec["last_reviewed_on"] = today - timedelta(days=spec.pop("reviewed_days_ago"))
        if "aging_cap" in spec:
            spec["aging_cap"] = tiers[spec["aging_cap"]]
        if "preemptible_tiers" in spec:
            spec["preemptible_tiers"] = [tiers[slug] for slug in spec["preemptible_tiers"]]
        tiers[spec["slug"]] = tier_create(**kw, **spec)
        created["tiers"] += 1
    return tiers


def _classes_ensure(
    *, kw: dict[str, Any], users: dict[str, User], created: Counter[str]
) -> dict[str, PreemptionClass]:
    classes = {item.slug: item for item in PreemptionClass.objects.all()}
    for class_spec in PREEMPTION_CLASSES:
        spec = dict(class_spec)
        if spec["slug"] in classes:
            continue
        spec["recovery_owner"] = users[spec["recovery_owner"]]
        classes[spec["slug"]] = preemption_class_create(**kw, **spec)
        created["preemption classes"] += 1
    return classes


def _projects_ensure(
    *,
    kw: dict[str, Any],
    users: dict[str, User],
    tiers: dict[str, PriorityTier],
    created: Counter[str],
) -> dict[str, Project]:
    """The projects and their members."""
    projects = {project.slug: project for project in Project.objects.all()}
    memberships = set(Membership.objects.values_list("project__slug", "user__username"))
    for slug, name, tier_slug, lead, members, description in PROJECTS:
        if slug not in projects:
            projects[slug] = project_create(
                **kw,
                slug=slug,
                name=name,
                description=description,
                tier=tiers[tier_slug] if tier_slug else None,
            )
            created["projects"] += 1
        roles = [(lead, ProjectRole.LEAD)] + [(m, ProjectRole.MEMBER) for m in members]
        for username, role in roles:
            if (slug, username) not in memberships:
                membership_set(**kw, project=projects[slug], member=users[username], role=role)
                created["memberships"] += 1
    return projects


def _quotas_ensure(
    *,
    kw: dict[str, Any],
    projects: dict[str, Project],
    pools: dict[str, Pool],
    flavors: dict[str, GpuFlavor],
    classes: dict[str, PreemptionClass],
    today: date,
    created: Counter[str],
) -> None:
    quotas = set(Quota.objects.values_list("project__slug", "pool__slug", "flavor__slug"))
    for quota in QUOTAS:
        if (quota.project, quota.pool, quota.flavor) in quotas:
            continue
        quota_create(
            **kw,
            project=projects[quota.project],
            pool=pools[quota.pool],
            flavor=flavors[quota.flavor],
            guarantee=quota.guarantee,
            borrow_limit=quota.borrow_limit,
            lending_limit=quota.lending_limit,
            fair_share_weight=quota.fair_share_weight,
            reclaim_grace_minutes=quota.reclaim_grace_minutes,
            preemption_class=classes[quota.preemption_class],
            last_reviewed_on=today - timedelta(days=quota.reviewed_days_ago),
        )
        created["quotas"] += 1
