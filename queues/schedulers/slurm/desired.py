"""Compiling the effective rules into the desired Slurm QOS, accounts and associations."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from governance.models import Membership, Pool, PreemptionClass, PreemptionKind, PriorityTier
from governance.selectors import EffectiveProject, EffectiveRules

from ..backends import JOB, State
from .values import (
    ACCOUNT,
    ASSOCIATION,
    GPU,
    LIMIT_OPTIONS,
    ORGANIZATION,
    QOS,
    QOS_FIELDS,
    ROOT_ACCOUNT,
    SLURM_USER,
    association_name,
    borrow_qos,
    cautious_qos,
    description,
    format_list,
    format_tres,
    guarantee_qos,
    pool_account,
    project_account,
    tier_qos,
    tier_qos_family,
)

# The limits Arbiter leaves unset on accounts and associations (compared all the same, so a
# hand-set one is drift and the sync clears it); an association's GrpTRES too.
NO_LIMITS = dict.fromkeys(LIMIT_OPTIONS, "")


def _qos(**fields: str) -> dict[str, str]:
    """A QOS entry with every field Arbiter manages (unset ones empty)."""
    return {name: fields.get(name, "") for name in QOS_FIELDS}


def _class_slug(klass: PreemptionClass) -> str:
    return klass.slug.lower() if klass.kind == PreemptionKind.CAUTIOUS else ""


def desired_state(
    *,
    rules: EffectiveRules,
    pools: Iterable[Pool],
    capacities: dict[tuple[int, int], int],
    gres_types: dict[int, list[str]] | None = None,
) -> State:
    """The QOS, accounts and associations that make Slurm enforce ``rules``.

    Slurm uses, per TRES and per kind of limit, the first limit it finds (partition QOS,
    job QOS, user association, accounts upward), and a job that asks for untyped GPUs
    (``--gres=gpu:N``) is checked against the untyped ``gres/gpu`` limits only, wherever it
    lands (measured on Slurm 22.05). So:

    * a project account carries ``GrpTRES`` with the untyped total *and* one typed limit per
      GRES type of the pool (``0`` for the types it has no quota for);
    * a guarantee QOS caps the project with ``MaxTRESPerAccount`` (a different limit, which
      leaves the account's ``GrpTRES`` in force), never with ``GrpTRES``;
    * a tier cap is a tier QOS ``GrpTRES=gres/gpu=N``: it replaces the account's untyped
      total for jobs in that QOS, so there the typed limits (typed requests) hold natively
      and untyped requests are left to the guard (see ``enforcement``).
    """
    pools = sorted(pools, key=lambda pool: pool.slug)
    qos: dict[str, dict[str, str]] = {}
    accounts: dict[str, dict[str, str]] = {}
    associations: dict[str, dict[str, str]] = {}
    jobs: dict[str, dict[str, str]] = {}
    if not pools:
        return {QOS: qos, ACCOUNT: accounts, ASSOCIATION: associations, JOB: jobs}

    accounts[ROOT_ACCOUNT] = account_fields("managed by arbiter", "root", 1, {})
    users = slurm_users()
    plans, borrowers, protected_tiers = _plans(rules, pools)
    jobs.update(_job_requests(rules, plans, protected_tiers))
    preemptible, cautious_of, cautious_tiers = _cautious_tiers(rules, plans)
    for pool in pools:
        accounts[pool_account(pool)] = account_fields(f"pool {pool.name}", ROOT_ACCOUNT, 1, {})
    qos.update(_borrow_qos(borrowers))
    qos.update(_tier_qos(rules, cautious_tiers, protected_tiers, sorted(borrowers)))
    _project_entries(
        rules=rules,
        pools=pools,
        plans=plans,
        borrowers=borrowers,
        capacities=capacities,
        gres_types=gres_types or {},
        users=users,
        preemptible=preemptible,
        cautious_of=cautious_of,
        out=(qos, accounts, associations),
    )
    return {QOS: qos, ACCOUNT: accounts, ASSOCIATION: associations, JOB: jobs}


# One entry per (pool, project): the pool, the project's slug and rules, its quotas in the
# pool, whether one of them forbids preemption, and its borrow QOS ("": it never borrows).
Plan = tuple[Pool, str, EffectiveProject, list, bool, str]
# The borrow QOS of each pool: one for allowed-class work, one per cautious class, each with
# its class (None: allowed) and its grace time in seconds.
Borrowers = dict[str, tuple[Pool, PreemptionClass | None, int]]


def _plans(rules: EffectiveRules, pools: list[Pool]) -> tuple[list[Plan], Borrowers, set[int]]:
    """What each project gets in each pool, the borrow QOS they use, and the tiers of
    projects whose work must never be preempted (which get a protected copy of their QOS)."""
    pool_ids = {pool.pk for pool in pools}
    protected_tiers: set[int] = set()
    plans: list[Plan] = []
    borrowers: Borrowers = {}
    for pool in pools:
        borrowers[borrow_qos(pool)] = (pool, None, 0)
    for slug, project in sorted(rules.projects.items()):
        by_pool: dict[int, list] = defaultdict(list)
        for quota in project.quotas:
            if quota.quota.pool_id in pool_ids:
                by_pool[quota.quota.pool_id].append(quota)
        for pool in pools:
            quotas = by_pool.get(pool.pk)
            if not quotas:
                continue
            forbidden = any(q.preemption_class.kind == PreemptionKind.FORBIDDEN for q in quotas)
            borrows = not forbidden and any(
                q.borrow_limit is None or q.borrow_limit > 0 for q in quotas
            )
            borrow_name = ""
            if borrows:
                cautious = [
                    q.preemption_class
                    for q in quotas
                    if q.preemption_class.kind == PreemptionKind.CAUTIOUS
                ]
                klass = max(
                    cautious, key=lambda c: (c.min_runtime_minutes or 0, c.slug), default=None
                )
                borrow_name = borrow_qos(pool, _class_slug(klass) if klass else "")
                grace = max(q.quota.reclaim_grace_minutes or 0 for q in quotas) * 60
                known = borrowers.get(borrow_name, (pool, klass, 0))
                borrowers[borrow_name] = (pool, klass, max(known[2], grace))
            if forbidden:
                protected_tiers.update(tier.pk for tier in project.allowed_tiers)
            plans.append((pool, slug, project, quotas, forbidden, borrow_name))
    return plans, borrowers, protected_tiers


def _job_requests(
    rules: EffectiveRules, plans: list[Plan], protected_tiers: set[int]
) -> dict[str, dict[str, str]]:
    """Every project's named-job requests (``job_requests``); adds to ``protected_tiers``."""
    jobs: dict[str, dict[str, str]] = {}
    # Each project's accounts, grouped once (a scan of every plan per project was quadratic).
    accounts_of: dict[str, list[tuple[str, bool]]] = defaultdict(list)
    for pool, slug, _project, _quotas, forbidden, _borrow in plans:
        accounts_of[slug].append((project_account(pool, slug), forbidden))
    for slug, project in sorted(rules.projects.items()):
        if slug in accounts_of:
            jobs.update(job_requests(slug, project, accounts_of[slug], protected_tiers))
    return jobs


def _cautious_tiers(
    rules: EffectiveRules, plans: list[Plan]
) -> tuple[set[int], dict[tuple[int, str], PreemptionClass], dict[int, dict[str, PreemptionClass]]]:
    """The tiers another tier may preempt; each (pool, project)'s cautious class; and per
    preemptible tier, the cautious classes whose work runs in it.

    Cautious work in a tier that another tier may preempt runs in a copy of that tier's QOS
    with the class's PreemptExemptTime (the tier QOS is shared, so it cannot carry one)."""
    preemptible = {
        t.pk for tier in rules.tiers if tier.may_preempt for t in tier.preemptible_tiers.all()
    }
    cautious_of: dict[tuple[int, str], PreemptionClass] = {}
    cautious_tiers: dict[int, dict[str, PreemptionClass]] = defaultdict(dict)
    for pool, slug, project, quotas, forbidden, _borrow in plans:
        klass = _cautious_class(quotas)
        if forbidden or klass is None:
            continue
        cautious_of[(pool.pk, slug)] = klass
        for tier in project.allowed_tiers:
            if tier.pk in preemptible:
                cautious_tiers[tier.pk][_class_slug(klass)] = klass
    return preemptible, cautious_of, cautious_tiers


def _borrow_qos(borrowers: Borrowers) -> dict[str, dict[str, str]]:
    """The borrow QOS of every pool.

    Always there, so that the Preempt lists naming them never have to be emptied (Slurm
    22.05 mishandles an emptied list); who may use them depends on the quotas."""
    qos: dict[str, dict[str, str]] = {}
    for name, (pool, klass, grace) in sorted(borrowers.items()):
        text = f"borrowed gpus in pool {pool.name}"
        exempt = ""
        if klass is not None:
            text += f" class {klass.slug}"
            exempt = str((klass.min_runtime_minutes or 0) * 60) if klass.min_runtime_minutes else ""
        qos[name] = _qos(
            description=description(text),
            priority="0",
            preempt_mode="requeue",
            grace_time=str(grace) if grace else "",
            preempt_exempt_time=exempt,
        )
    return qos


def _tier_qos(
    rules: EffectiveRules,
    cautious_tiers: dict[int, dict[str, PreemptionClass]],
    protected_tiers: set[int],
    borrow_names: list[str],
) -> dict[str, dict[str, str]]:
    """Each tier's QOS, with its cautious-class copies and its never-preempted copy."""
    qos: dict[str, dict[str, str]] = {}
    for tier in rules.tiers:
        victims = []
        if tier.may_preempt:
            for t in tier.preemptible_tiers.all():
                # The victim tier's own QOS and its cautious copies (never the protected one).
                victims += list(tier_qos_family(t, classes=cautious_tiers.get(t.pk, {})))
        if tier.may_preempt:
            victims += borrow_names
        per_job = format_tres({GPU: tier.max_gpus_per_job}) if tier.max_gpus_per_job else ""
        fields = _qos(
            description=description(f"tier {tier.name}"),
            priority=str(tier.scheduler_value),
            preempt=format_list(victims),
            preempt_mode="requeue",
            grp_tres=format_tres({GPU: tier.max_gpus_total}) if tier.max_gpus_total else "",
            # Per job only: MaxTRESPerUser would cap a member's running jobs together.
            max_tres_per_job=per_job,
        )
        classes = cautious_tiers.get(tier.pk, {})
        family = tier_qos_family(tier, classes=classes, protected=tier.pk in protected_tiers)
        for name, role in family.items():
            if role.klass:
                klass = classes[role.klass]
                qos[name] = {
                    **fields,
                    "description": description(f"tier {tier.name} class {klass.slug}"),
                    "preempt_exempt_time": str((klass.min_runtime_minutes or 0) * 60),
                }
            elif role.protected:
                qos[name] = {
                    **fields,
                    "description": description(f"tier {tier.name} never preempted"),
                    "preempt_mode": "cluster",
                }
            else:
                qos[name] = fields
    return qos


def _project_entries(
    *,
    rules: EffectiveRules,
    pools: list[Pool],
    plans: list[Plan],
    borrowers: Borrowers,
    capacities: dict[tuple[int, int], int],
    gres_types: dict[int, list[str]],
    users: dict[int, list[str]],
    preemptible: set[int],
    cautious_of: dict[tuple[int, str], PreemptionClass],
    out: tuple[dict[str, dict[str, str]], dict[str, dict[str, str]], dict[str, dict[str, str]]],
) -> None:
    """Each (pool, project)'s account, guarantee QOS and member associations, added to
    ``out`` (the QOS, accounts and associations)."""
    qos, accounts, associations = out
    default_tier = rules.default_tier
    # What every project of a pool shares, computed once per pool rather than per project.
    guarantee_text = {pool.pk: description(f"guarantee in pool {pool.name}") for pool in pools}
    guarantee_preempt = {
        pool.pk: format_list(n for n, b in borrowers.items() if b[0].pk == pool.pk)
        for pool in pools
    }
    for pool, slug, project, quotas, forbidden, borrow_name in plans:
        account = project_account(pool, slug)
        maximum, guarantee = _project_tres(pool, quotas, capacities, gres_types)
        accounts[account] = account_fields(
            f"project {project.project.name} in pool {pool.name}",
            pool_account(pool),
            sum(q.quota.fair_share_weight for q in quotas),
            maximum,
        )
        klass = cautious_of.get((pool.pk, slug))

        def tier_name(
            t: PriorityTier, klass: PreemptionClass | None = klass, forbidden: bool = forbidden
        ) -> str:
            if klass is not None and t.pk in preemptible:
                return cautious_qos(t, _class_slug(klass))
            return tier_qos(t, protected=forbidden)

        allowed = [tier_name(t) for t in project.allowed_tiers]
        names = list(allowed)
        top_tier = project.tier or default_tier
        if guarantee.get(GPU):
            g_name = guarantee_qos(pool, slug)
            qos[g_name] = _qos(
                # The name says whose: equal settings let one call set many of them.
                description=guarantee_text[pool.pk],
                priority=str(top_tier.scheduler_value if top_tier else 0),
                preempt=guarantee_preempt[pool.pk],
                preempt_mode="cluster",
                max_tres_per_account=format_tres(guarantee),  # type: ignore[arg-type]
            )
            names.append(g_name)
        if borrow_name:
            names.append(borrow_name)
        # Jobs submitted without -q run at the project's effective tier (grants included).
        default = ""
        if top_tier is not None and top_tier in project.allowed_tiers:
            default = tier_name(top_tier)
        elif allowed:
            default = allowed[-1]
        elif names:
            default = sorted(names)[0]
        allowed_qos = format_list(names)
        for user in users.get(project.project.pk, ()):
            associations[association_name(user, account)] = {
                "qos": allowed_qos,
                "default_qos": default,
                "grp_tres": "",
                **NO_LIMITS,
            }


def _project_tres(
    pool: Pool,
    quotas: list,
    capacities: dict[tuple[int, int], int],
    gres_types: dict[int, list[str]],
) -> tuple[dict[str, int], dict[str, int]]:
    """A project's maximum and guarantee GPUs in ``pool``, untyped and per GRES type."""
    # Every GRES type of the pool gets a typed limit: 0 where the project has no quota.
    maximum: dict[str, int] = {f"{GPU}:{t}": 0 for t in gres_types.get(pool.pk, []) if t}
    guarantee: dict[str, int] = dict(maximum)
    maximum[GPU] = guarantee[GPU] = 0
    for quota in quotas:
        flavor = quota.quota.flavor
        top = quota.maximum
        if top is None:
            top = max(capacities.get((pool.pk, flavor.pk), 0), quota.guarantee)
        for key in {GPU, f"{GPU}:{flavor.gres_type}" if flavor.gres_type else GPU}:
            maximum[key] = maximum.get(key, 0) + top
            guarantee[key] = guarantee.get(key, 0) + quota.guarantee
    return maximum, guarantee


def slurm_users() -> dict[int, list[str]]:
    """Each project's members as Slurm user names (one query, by project id).

    A service account submits nothing to Slurm itself (it acts through the API), and a name
    Slurm would refuse gets no association.
    """
    users: dict[int, list[str]] = defaultdict(list)
    rows = Membership.objects.filter(user__is_service_account=False).values_list(
        "project_id", "user__username"
    )
    for project_id, username in rows.order_by("project_id", "user__username"):
        user = username.lower()
        if SLURM_USER.match(user):
            users[project_id].append(user)
    return users


def _cautious_class(quotas: list) -> PreemptionClass | None:
    """The project's cautious class with the longest minimum runtime (None: no such class)."""
    cautious = [
        q.preemption_class
        for q in quotas
        if q.preemption_class.kind == PreemptionKind.CAUTIOUS
        and q.preemption_class.min_runtime_minutes
    ]
    return max(cautious, key=lambda c: (c.min_runtime_minutes or 0, c.slug), default=None)


def job_requests(
    slug: str,
    project: EffectiveProject,
    accounts: list[tuple[str, bool]],
    protected_tiers: set[int],
) -> dict[str, dict[str, str]]:
    """What the project's grants ask for its named jobs (resolved by ``settle``).

    ``tier``: the granted tier's QOS (empty: protection only); ``protect``: the job's
    class forbids preemption; ``accounts``: where the project's jobs run on this cluster
    (``protected_accounts``: those of forbidden-class quotas); ``base``: the tier a
    protected job keeps when its own QOS is no tier's.
    """
    protect = {
        job
        for job, klass in project.job_preemption_classes.items()
        if klass.kind == PreemptionKind.FORBIDDEN
    }
    any_forbidden = any(forbidden for _account, forbidden in accounts)
    requests = {}
    for job in sorted(set(project.job_tiers) | protect):
        tier = project.job_tiers.get(job)
        if job in protect:
            protected_tiers.update(t.pk for t in project.allowed_tiers)
        if tier is not None and (job in protect or any_forbidden):
            protected_tiers.add(tier.pk)
        requests[job] = {
            "project": slug,
            "tier": tier_qos(tier) if tier else "",
            "protect": "yes" if job in protect else "",
            "accounts": format_list(account for account, _f in accounts),
            "protected_accounts": format_list(account for account, f in accounts if f),
            "base": tier_qos(project.tier) if project.tier else "",
        }
    return requests


def account_fields(text: str, parent: str, fairshare: int, tres: dict[str, int]) -> dict[str, str]:
    return {
        "description": description(text),
        "organization": ORGANIZATION,
        "parent": parent,
        "fairshare": str(fairshare),
        "grp_tres": format_tres(tres),  # type: ignore[arg-type]
        **NO_LIMITS,
    }
