"""How Slurm enforces each rule once compiled: natively, or not at all (and why).

Shown in every plan and dry run, per rule, so that nobody believes in a limit the
scheduler does not hold. The facts come from the lab (Slurm 22.05): a QOS ``GrpTRES`` on a
TRES replaces the account's limit on it; untyped GPU requests are checked against untyped
limits only, wherever they land.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.utils.translation import gettext as _

from governance.models import GpuFlavor, Pool, PreemptionKind, PriorityTier
from governance.selectors import EffectiveProject, EffectiveQuota, EffectiveRules
from queues.schedulers.slurm.config import slurm_conf_lines
from queues.schedulers.slurm.values import borrow_qos, guarantee_qos, project_account, tier_qos
from queues.services.enforcement import (
    GUARD,
    NATIVE,
    NOT_ENFORCED,
    SUBMIT,
    cautious_rule,
    daily_maximum_rule,
)
from queues.services.enforcement import enforcement_row as _row


def rule_enforcement(
    *,
    rules: EffectiveRules,
    pools: Iterable[Pool],
    gres_types: dict[int, list[str]],
    priority_config: dict[str, str] | None = None,
    plugin: dict | None = None,
) -> list[dict[str, str]]:
    """One row per rule: ``rule`` (what), ``how`` (native / submit / guard / not_enforced),
    ``detail``. ``plugin``: the last check of Arbiter's job_submit plugin (``submit``)."""
    plugin_on = bool(plugin and plugin.get("current"))
    pools = sorted(pools, key=lambda pool: pool.slug)
    pool_ids = {pool.pk for pool in pools}
    rows = [row for tier in rules.tiers for row in _tier_rows(tier)]
    rows += _aging_rows(rules, priority_config)
    capped = [tier for tier in rules.tiers if tier.max_gpus_total]
    for slug, project in sorted(rules.projects.items()):
        for quota in project.quotas:
            pool = next((p for p in pools if p.pk == quota.quota.pool_id), None)
            if pool is None or quota.quota.pool_id not in pool_ids:
                continue
            rows += _quota_rows(
                slug=slug,
                project=project,
                quota=quota,
                pool=pool,
                capped=capped,
                several_types=len(gres_types.get(pool.pk, [])) > 1,
                plugin_on=plugin_on,
            )
    return rows


def _tier_rows(tier: PriorityTier) -> list[dict[str, str]]:
    """A tier's priority, caps and preemption: all native QOS settings."""
    rows: list[dict[str, str]] = []
    name = tier_qos(tier)
    rows.append(
        _row(
            _("Tier %(tier)s: priority") % {"tier": tier.name},
            NATIVE,
            _("QOS %(qos)s Priority=%(value)d") % {"qos": name, "value": tier.scheduler_value},
        )
    )
    if tier.max_gpus_total:
        rows.append(
            _row(
                _("Tier %(tier)s: at most %(gpus)d GPUs across projects")
                % {"tier": tier.name, "gpus": tier.max_gpus_total},
                NATIVE,
                _(
                    "QOS %(qos)s GrpTRES=gres/gpu=%(gpus)d (typed and untyped requests, every "
                    "request form). Where the tier also has QOS copies (%(qos)s.<class> for a "
                    "cautious class, %(qos)s-protected), the cap is split over them: each holds "
                    "a share as its GrpTRES, never more than %(gpus)d together, and Arbiter "
                    "moves the free part to the QOS where jobs wait after each sync and each "
                    "minute (a job may wait up to a minute for its share)"
                )
                % {"qos": name, "gpus": tier.max_gpus_total},
            )
        )
    if tier.max_gpus_per_job:
        rows.append(
            _row(
                _("Tier %(tier)s: at most %(gpus)d GPUs per job")
                % {"tier": tier.name, "gpus": tier.max_gpus_per_job},
                NATIVE,
                _("QOS %(qos)s MaxTRESPerJob") % {"qos": name},
            )
        )
    if tier.may_preempt:
        rows.append(
            _row(
                _("Tier %(tier)s: may preempt lower tiers and borrowed GPUs") % {"tier": tier.name},
                NATIVE,
                _("QOS %(qos)s Preempt= list, PreemptMode=requeue") % {"qos": name},
            )
        )
    return rows


def _aging_rows(
    rules: EffectiveRules, priority_config: dict[str, str] | None
) -> list[dict[str, str]]:
    """The tiers' aging: native only when slurm.conf's priority settings match them."""
    rows: list[dict[str, str]] = []
    aging = [t for t in rules.tiers if t.aging_after_minutes and t.aging_cap_id]
    if aging:
        wanted = dict(line.split("=", 1) for line in slurm_conf_lines(rules.tiers))
        have = priority_config or {}
        differ = [
            f"{key}={value} ({_('cluster has')} {have.get(key, '?')})"
            for key, value in wanted.items()
            if key in ("PriorityWeightAge", "PriorityMaxAge")
            and not _same_setting(key, have.get(key, ""), value)
        ]
        rows.append(
            _row(
                _("Aging of tiers %(tiers)s") % {"tiers": ", ".join(t.name for t in aging)},
                NOT_ENFORCED if differ else NATIVE,
                _("not enforced on this cluster: slurm.conf needs %(lines)s")
                % {"lines": "; ".join(differ)}
                if differ
                else _("slurm.conf PriorityWeightAge and PriorityMaxAge match the tiers"),
            )
        )
    return rows


def _quota_rows(
    *,
    slug: str,
    project: EffectiveProject,
    quota: EffectiveQuota,
    pool: Pool,
    capped: list[PriorityTier],
    several_types: bool,
    plugin_on: bool,
) -> list[dict[str, str]]:
    """A quota's maximum, untyped requests, guarantee, lending limit and preemption class."""
    rows: list[dict[str, str]] = []
    flavor = quota.quota.flavor
    account = project_account(pool, slug)
    where = {"project": slug, "pool": pool.slug, "flavor": flavor.slug}
    typed = f"gres/gpu:{flavor.gres_type}" if flavor.gres_type else "gres/gpu"
    top = "∞" if quota.maximum is None else str(quota.maximum)
    rows.append(
        _row(
            _("%(project)s in %(pool)s/%(flavor)s: maximum %(top)s GPUs") % {**where, "top": top},
            NATIVE,
            _(
                "account %(account)s GrpTRES %(typed)s and the untyped gres/gpu total; "
                "typed limits 0 for the pool's other GPU types"
            )
            % {"account": account, "typed": typed},
        )
    )
    in_capped = [t.name for t in capped if t in project.allowed_tiers]
    if several_types or in_capped:
        rows.append(_untyped_row(where, flavor, in_capped, plugin_on=plugin_on))
    if quota.guarantee:
        rows.append(
            _row(
                _("%(project)s in %(pool)s/%(flavor)s: guarantee %(gpus)d GPUs")
                % {**where, "gpus": quota.guarantee},
                NATIVE,
                _(
                    "QOS %(qos)s MaxTRESPerAccount (leaves the account limits in "
                    "force) and may preempt the pool's borrow QOS"
                )
                % {"qos": guarantee_qos(pool, slug)},
            )
        )
    if quota.lending_limit is not None and quota.lending_limit < quota.guarantee:
        rows.append(
            _row(
                _("%(project)s in %(pool)s/%(flavor)s: lends at most %(gpus)d GPUs")
                % {**where, "gpus": quota.lending_limit},
                NOT_ENFORCED,
                _(
                    "not enforced on this cluster: Slurm has no lending limit; idle "
                    "guaranteed GPUs are lent and reclaimed by preemption"
                ),
            )
        )
    return rows + _class_rows(slug=slug, quota=quota, pool=pool)


def _untyped_row(
    where: dict[str, str], flavor: GpuFlavor, in_capped: list[str], *, plugin_on: bool
) -> dict[str, str]:
    """Untyped GPU requests where they can slip past a typed limit: the job_submit plugin
    rewrites or refuses them, or else the guard holds them afterwards."""
    untyped = _(
        "untyped requests (--gres=gpu:N) are checked against untyped limits only, so "
        "Slurm may place them on a GPU type the project has no quota for"
    )
    if in_capped:
        untyped += _(
            "; in capped tiers (%(tiers)s) the tier's GrpTRES replaces the project's "
            "untyped total: ask for typed GPUs (--gres=gpu:%(type)s:N) there"
        ) % {"tiers": ", ".join(in_capped), "type": flavor.gres_type or "<type>"}
    if plugin_on:
        how, detail = (
            SUBMIT,
            _(
                "job_submit plugin: %(reason)s. The plugin rewrites an untyped "
                "request to the one GPU type the project may use in the pool, or "
                "refuses it with the rule, the quota and a typed request to submit "
                "instead; the guard stays as a backstop"
            )
            % {"reason": untyped},
        )
    else:
        how, detail = (
            GUARD,
            _(
                "guard: %(reason)s. Arbiter's job_submit plugin is not installed or "
                "not current on this cluster, so each minute Arbiter holds pending "
                "and requeues and holds running untyped jobs that put the project "
                "over a limit (with a comment and an alert); until then they run"
            )
            % {"reason": untyped},
        )
    return _row(
        _("%(project)s in %(pool)s/%(flavor)s: untyped GPU requests") % where,
        how,
        detail,
    )


def _class_rows(*, slug: str, quota: EffectiveQuota, pool: Pool) -> list[dict[str, str]]:
    """The quota's preemption class: never preempted, or cautious (runtime, grace, a daily
    maximum Slurm cannot count)."""
    rows: list[dict[str, str]] = []
    klass = quota.preemption_class
    if klass.kind == PreemptionKind.FORBIDDEN:
        rows.append(
            _row(
                _("%(project)s: class %(klass)s, never preempted")
                % {"project": slug, "klass": klass.name},
                NATIVE,
                _("tier QOS …-protected in no Preempt list; no borrow QOS"),
            )
        )
    elif klass.kind == PreemptionKind.CAUTIOUS:
        name = borrow_qos(pool, klass.slug.lower())
        if klass.min_runtime_minutes or quota.quota.reclaim_grace_minutes:
            rows.append(
                _row(
                    cautious_rule(
                        project=slug,
                        klass=klass,
                        grace_minutes=quota.quota.reclaim_grace_minutes,
                    ),
                    NATIVE,
                    _(
                        "borrowed work: QOS %(qos)s PreemptExemptTime and GraceTime; "
                        "work in a preemptible tier: the tier's copy <tier>.%(klass)s "
                        "with the same PreemptExemptTime, the project's QOS instead of "
                        "the tier's"
                    )
                    % {"qos": name, "klass": klass.slug.lower()},
                )
            )
        if klass.max_preemptions_per_day:
            rows.append(
                _row(
                    daily_maximum_rule(project=slug, klass=klass),
                    NOT_ENFORCED,
                    _("not enforced on this cluster: Slurm cannot count preemptions per day"),
                )
            )
    return rows


def _same_setting(key: str, have: str, want: str) -> bool:
    if key == "PriorityMaxAge":
        # scontrol shows 1-00:00:00 for slurm.conf's 1-0.
        return _minutes(have) == _minutes(want)
    return have.strip() == want.strip()


def _minutes(value: str) -> int:
    days, _sep, clock = value.strip().rpartition("-")
    parts = [int(p or 0) for p in clock.split(":")] if clock else [0]
    while len(parts) < 3:
        parts.append(0)
    return int(days or 0) * 1440 + parts[0] * 60 + parts[1]
