"""How Kueue enforces each rule once compiled: natively, or not at all (and why).

The Kueue twin of ``slurm.enforcement``, shown in every plan and dry run, per rule, so that
nobody believes in a limit the cluster does not hold. The facts come from the lab
(Kueue v0.17.0 on kube-apiserver v1.35, deploy/k8s/up.sh, with the configuration in
deploy/k8s/kueue-config.yaml) and its truth test (tests/queues/test_kueue_truth.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.utils.translation import gettext as _

from governance.models import GrantEnd, Pool, PreemptionKind, PriorityTier
from governance.selectors import EffectiveProject, EffectiveQuota, EffectiveRules
from queues.schedulers.kueue.desired import cluster_queue_name
from queues.schedulers.kueue.values import k8s_name
from queues.services.enforcement import (
    ARBITER,
    NATIVE,
    NOT_ENFORCED,
    daily_maximum_rule,
)
from queues.services.enforcement import enforcement_row as _row


def rule_enforcement(
    *, rules: EffectiveRules, pools: Iterable[Pool], mutating: bool = True
) -> list[dict[str, str]]:
    """One row per rule: ``rule`` (what), ``how`` (native / arbiter / not_enforced),
    ``detail``; ``arbiter``: held by Arbiter's enforcer (``kueue.enforce``).
    ``mutating``: the API server serves MutatingAdmissionPolicy (``desired.tier_policy``)."""
    pools = sorted(pools, key=lambda pool: pool.slug)
    pool_ids = {pool.pk for pool in pools}
    rows = [row for tier in rules.tiers for row in _tier_rows(tier)]
    if rules.projects:
        rows.append(
            _row(
                _("Every GPU workload in a governed namespace goes through Kueue"),
                NATIVE,
                _(
                    "Kueue's integrations batch/job, pod, deployment, statefulset (and "
                    "JobSet, RayJob where their CRDs are installed) on the namespaces labelled "
                    "app.kubernetes.io/managed-by=arbiter; ValidatingAdmissionPolicy "
                    "arbiter-gpu-through-kueue refuses there a Pod asking for nvidia.com/gpu "
                    "that Kueue does not manage (other than a Job's, made by the job "
                    "controller)"
                ),
            )
        )
    for slug, project in sorted(rules.projects.items()):
        rows.append(_tiers_row(slug, project, rules.default_tier, mutating=mutating))
        for quota in project.quotas:
            pool = next((p for p in pools if p.pk == quota.quota.pool_id), None)
            if pool is None or quota.quota.pool_id not in pool_ids:
                continue
            rows += _quota_rows(slug=slug, quota=quota, pool=pool)
    return rows


def _tier_rows(tier: PriorityTier) -> list[dict[str, str]]:
    """A tier's priority (native), and its caps, victims and aging (not held by Kueue)."""
    rows: list[dict[str, str]] = []
    name = k8s_name(tier.slug)
    rows.append(
        _row(
            _("Tier %(tier)s: priority") % {"tier": tier.name},
            NATIVE,
            _(
                "WorkloadPriorityClass %(name)s value %(value)d (Kueue's order); "
                "PriorityClass %(name)s with the same value and preemptionPolicy Never "
                "(kube-scheduler's queue order, no eviction outside Kueue)"
            )
            % {"name": name, "value": tier.scheduler_value},
        )
    )
    if tier.max_gpus_total or tier.max_gpus_per_job:
        rows.append(
            _row(
                _("Tier %(tier)s: GPU caps") % {"tier": tier.name},
                ARBITER,
                _(
                    "Kueue has no per-priority limits: Arbiter's enforcer holds a Workload "
                    "asking more than %(job)s GPUs, and those past %(total)s GPUs of the tier "
                    "across projects (spec.active false, released oldest first when they fit)"
                )
                % {
                    "job": tier.max_gpus_per_job or "∞",
                    "total": tier.max_gpus_total or "∞",
                },
            )
        )
    if tier.may_preempt:
        victims = sorted(t.name for t in tier.preemptible_tiers.all())
        rows.append(
            _row(
                _("Tier %(tier)s: may preempt %(victims)s")
                % {"tier": tier.name, "victims": ", ".join(victims) or "-"},
                NOT_ENFORCED,
                _(
                    "not enforced on this cluster as a victim list: Kueue preempts by "
                    "priority only (withinClusterQueue LowerPriority: every lower tier in "
                    "the project's own queue), and across projects only to reclaim a "
                    "guarantee or by fair sharing"
                ),
            )
        )
    if tier.aging_after_minutes and tier.aging_cap_id:
        cap = tier.aging_cap
        rows.append(
            _row(
                _("Tier %(tier)s: aging") % {"tier": tier.name},
                ARBITER,
                _(
                    "Kueue has no aging: Arbiter's enforcer raises a pending Workload's "
                    "spec.priority every %(minutes)d minutes by %(step)d score points (in "
                    "scheduler values from %(value)d to %(cap)d), never above %(cap)d"
                )
                % {
                    "minutes": tier.aging_after_minutes,
                    "step": tier.aging_step or 0,
                    "value": tier.scheduler_value,
                    "cap": cap.scheduler_value if cap else tier.scheduler_value,
                },
            )
        )
    if tier.after_grant != GrantEnd.KEEP:
        rows.append(
            _row(
                _("Tier %(tier)s: when a grant of it ends, work admitted under it %(what)s")
                % {"tier": tier.name, "what": tier.get_after_grant_display()},
                ARBITER,
                _(
                    "Arbiter's enforcer sets the spec.priority of a Workload at a tier its "
                    "project may no longer use (Kueue keeps the granted value)"
                ),
            )
        )
    return rows


def _tiers_row(
    slug: str, project: EffectiveProject, default: PriorityTier | None, *, mutating: bool
) -> dict[str, str]:
    """The tiers a project may use: admission policies in its namespace."""
    own = project.tier or default
    if mutating:
        detail = _(
            "ValidatingAdmissionPolicy arbiter-tiers-<namespace> and its binding: the "
            "API server refuses a Job, Pod, Deployment or StatefulSet naming another tier "
            "(label kueue.x-k8s.io/priority-class or priorityClassName); "
            "MutatingAdmissionPolicy arbiter-tiers-<namespace> and its binding: one "
            "created naming none gets the label kueue.x-k8s.io/priority-class=%(own)s, "
            "the project's effective tier (grants included)"
        ) % {"own": k8s_name(own.slug) if own else "-"}
    else:
        detail = _(
            "ValidatingAdmissionPolicy arbiter-tiers-<namespace> and its binding: the "
            "API server refuses a Job, Pod, Deployment or StatefulSet naming another tier "
            "(label kueue.x-k8s.io/priority-class or priorityClassName), and one naming none "
            "unless the project's tier is the cluster default (this API server does not "
            "serve MutatingAdmissionPolicy, which would give it the project's tier)"
        )
    return _row(
        _("%(project)s: tiers %(tiers)s only")
        % {"project": slug, "tiers": ", ".join(t.name for t in project.allowed_tiers)},
        NATIVE,
        detail,
    )


def _quota_rows(*, slug: str, quota: EffectiveQuota, pool: Pool) -> list[dict[str, str]]:
    """A quota's guarantee and maximum, lending limit, fair-share weight and class."""
    rows: list[dict[str, str]] = []
    flavor = quota.quota.flavor
    queue = cluster_queue_name(slug, pool.slug)
    where = {"project": slug, "pool": pool.slug, "flavor": flavor.slug}
    klass = quota.preemption_class
    never = klass.kind == PreemptionKind.FORBIDDEN
    # Work that may never be preempted never borrows (borrowingLimit 0): its maximum is its
    # guarantee, whatever borrow limit the quota names.
    unbounded = quota.maximum is None
    top = str(quota.guarantee) if never else "∞" if unbounded else str(quota.maximum)
    rows.append(
        _row(
            _("%(project)s in %(pool)s/%(flavor)s: guarantee %(gpus)d, maximum %(top)s")
            % {**where, "gpus": quota.guarantee, "top": top},
            NATIVE,
            _(
                "ClusterQueue %(queue)s flavor %(flavor)s nominalQuota and "
                "borrowingLimit; reclaimWithinCohort Any; Jobs without a queue name "
                "go to the namespace's LocalQueue default (manageJobsWithoutQueueName)"
            )
            % {"queue": queue, "flavor": k8s_name(flavor.slug)},
        )
    )
    if quota.lending_limit is not None:
        rows.append(
            _row(
                _("%(project)s in %(pool)s/%(flavor)s: lends at most %(gpus)d GPUs")
                % {**where, "gpus": quota.lending_limit},
                NATIVE,
                _("ClusterQueue %(queue)s lendingLimit") % {"queue": queue},
            )
        )
    rows.append(
        _row(
            _("%(project)s in %(pool)s/%(flavor)s: fair-share weight %(weight)d")
            % {**where, "weight": quota.quota.fair_share_weight},
            NATIVE,
            _(
                "ClusterQueue %(queue)s fairSharing.weight (one per queue: the "
                "flavors' weights averaged by guarantee); acts with fair sharing on"
            )
            % {"queue": queue},
        )
    )
    rows.extend(_class_rows(slug=slug, quota=quota, where=where))
    return rows


def _class_rows(*, slug: str, quota: EffectiveQuota, where: dict[str, str]) -> list[dict[str, str]]:
    """What the quota's preemption class asks: never preempted, or a cautious class's minimum
    runtime, reclaim grace and daily maximum."""
    rows: list[dict[str, str]] = []
    klass = quota.preemption_class
    if klass.kind == PreemptionKind.FORBIDDEN:
        rows.append(
            _row(
                _("%(project)s in %(pool)s/%(flavor)s: class %(klass)s, never preempted")
                % {**where, "klass": klass.name},
                NATIVE,
                _(
                    "borrowingLimit 0 on this flavor (reclaim never hits it) and "
                    "withinClusterQueue Never"
                ),
            )
        )
    elif klass.kind == PreemptionKind.CAUTIOUS:
        rows.extend(_cautious_rows(slug=slug, quota=quota))
    return rows


def _cautious_rows(*, slug: str, quota: EffectiveQuota) -> list[dict[str, str]]:
    """A cautious class's minimum runtime and daily maximum (Arbiter's enforcer, by priority)
    and the quota's reclaim grace (not held: a reclaim ignores priority)."""
    rows: list[dict[str, str]] = []
    klass = quota.preemption_class
    reclaim = _(
        "a reclaim of a lent guarantee is not stopped: Kueue reclaims with "
        "reclaimWithinCohort Any, whatever the borrower's priority, the moment the lender's "
        "workload is queued"
    )
    if klass.min_runtime_minutes:
        rows.append(
            _row(
                _("%(project)s: class %(klass)s, %(minutes)d minutes before preemption")
                % {"project": slug, "klass": klass.name, "minutes": klass.min_runtime_minutes},
                ARBITER,
                _(
                    "Arbiter's enforcer runs admitted work of the class above every tier "
                    "(spec.priority) until it has run its minimum, so that no preemption by "
                    "priority picks it; %(reclaim)s"
                )
                % {"reclaim": reclaim},
            )
        )
    if quota.quota.reclaim_grace_minutes:
        rows.append(
            _row(
                _("%(project)s: %(grace)d minutes of grace before a reclaim")
                % {"project": slug, "grace": quota.quota.reclaim_grace_minutes},
                NOT_ENFORCED,
                _(
                    "not enforced on this cluster: %(reclaim)s, and Kueue has no grace "
                    "period (holding every lender's workload instead would delay work that "
                    "fits in free GPUs)"
                )
                % {"reclaim": reclaim},
            )
        )
    if klass.max_preemptions_per_day:
        rows.append(
            _row(
                daily_maximum_rule(project=slug, klass=klass),
                ARBITER,
                _(
                    "Arbiter's enforcer counts the class's preemptions today (Kueue's "
                    "eviction counts) and, at the maximum, runs its admitted work above "
                    "every tier until the day ends; %(reclaim)s"
                )
                % {"reclaim": reclaim},
            )
        )
    return rows
