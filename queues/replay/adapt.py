"""From the database to a replay's input: the effective rules and the recorded jobs.

The rules are read through ``governance.selectors.effective.effective_rules`` (the one
function the sync and the API read them through): ``rules_at(at=)`` gives the rules of one
instant, ``rules_timeline(start=, end=)`` one period per stretch between grant boundaries
(a grant starting, ending or revoked) in the window. Rule changes applied in the window are
not replayed as periods: the stored rules are today's, and a replay asks what *these* rules
(or a proposed change of them) would have done.

Compiled as the sync compiles them: a tier's per-job cap is also its per-user cap (Slurm's
``MaxTRESPerUser``), a project's maximum is its guarantee plus its borrow limit, minutes
become seconds, and a flavor is ``<pool slug>/<flavor slug>`` with the pool's capacity.

``jobs_from_evidence(start=, end=, project=)`` turns the workload evidence into jobs: those
submitted in the window with a flavor and GPUs, the duration they actually ran = end − first
start, less the time redone after preemptions (``gpu_seconds_lost`` / GPUs); a job still
running counts until ``end``. Jobs that never started have no duration to replay and are
counted as skipped, as are jobs without a pool, a flavor or GPUs.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db.models import Q

from governance.models import (
    GpuFlavor,
    Grant,
    Pool,
    PoolCapacity,
    PreemptionClass,
    PriorityTier,
    Project,
    Quota,
    RuleChange,
    RuleEdit,
)
from governance.selectors import rule_kind_for
from governance.selectors.effective import EffectiveRules, effective_rules
from queues.models import Cluster, WorkloadJob
from queues.selectors.definitions import job_pool_id, pool_maps

from .keys import flavor_key
from .rules import ALLOWED, ClassRule, Job, QuotaRule, Rules, TierRule
from .scheduler_model import SchedulerModel
from .slurm_conf import SlurmSettings

MINUTE = 60.0


def _tiers() -> tuple[TierRule, ...]:
    rows = PriorityTier.objects.select_related("aging_cap").prefetch_related("preemptible_tiers")
    return tuple(
        TierRule(
            slug=tier.slug,
            score=tier.score,
            max_gpus_per_job=tier.max_gpus_per_job,
            max_gpus_total=tier.max_gpus_total,
            max_gpus_per_user=None,  # Slurm's compilation caps per job only (no MaxTRESPerUser)
            may_preempt=tier.may_preempt,
            preemptible=frozenset(t.slug for t in tier.preemptible_tiers.all()),
            aging_after=(tier.aging_after_minutes * MINUTE if tier.aging_after_minutes else None),
            aging_step=tier.aging_step or 0,
            aging_cap=tier.aging_cap.score if tier.aging_cap is not None else None,
        )
        for tier in rows.order_by("-score", "slug")
    )


def _classes() -> tuple[ClassRule, ...]:
    return tuple(
        ClassRule(
            slug=cls.slug,
            kind=cls.kind,
            min_runtime=(cls.min_runtime_minutes or 0) * MINUTE,
            max_per_day=cls.max_preemptions_per_day or None,
            checkpoint_interval=(
                cls.max_checkpoint_interval_minutes * MINUTE
                if cls.max_checkpoint_interval_minutes
                else None
            ),
        )
        for cls in PreemptionClass.objects.order_by("slug")
    )


def capacities() -> dict[str, float]:
    return {
        flavor_key(row.pool.slug, row.flavor.slug): float(row.gpus)
        for row in PoolCapacity.objects.select_related("pool", "flavor").order_by("pk")
    }


def rules_from_effective(
    effective: EffectiveRules,
    *,
    tiers: tuple[TierRule, ...],
    classes: tuple[ClassRule, ...],
    capacity: dict[str, float],
) -> Rules:
    slugs = {project.project.pk: slug for slug, project in effective.projects.items()}
    quotas = []
    for quota in effective.quotas:
        key = flavor_key(quota.quota.pool.slug, quota.quota.flavor.slug)
        capacity.setdefault(key, 0.0)
        quotas.append(
            QuotaRule(
                project=slugs[quota.quota.project_id],
                flavor=key,
                guarantee=float(quota.guarantee),
                borrow_limit=None if quota.borrow_limit is None else float(quota.borrow_limit),
                lending_limit=None if quota.lending_limit is None else float(quota.lending_limit),
                fair_share_weight=float(quota.quota.fair_share_weight),
                reclaim_grace=quota.quota.reclaim_grace_minutes * MINUTE,
                preemption_class=quota.preemption_class.slug,
            )
        )
    job_tiers: dict[str, str] = {}
    job_classes: dict[str, str] = {}
    for project in effective.projects.values():
        job_tiers.update({job: tier.slug for job, tier in project.job_tiers.items()})
        job_classes.update({job: cls.slug for job, cls in project.job_preemption_classes.items()})
    allowed = [cls.slug for cls in classes if cls.kind == ALLOWED]
    return Rules(
        capacity=capacity,
        tiers=tiers,
        classes=classes,
        quotas=tuple(quotas),
        project_tiers={
            slug: project.tier.slug
            for slug, project in effective.projects.items()
            if project.tier is not None
        },
        default_tier=effective.default_tier.slug if effective.default_tier else "",
        default_class=allowed[0] if allowed else "",
        job_tiers=job_tiers,
        job_classes=job_classes,
    )


def rules_at(*, at: datetime) -> Rules:
    """The effective rules at ``at`` as a replay reads them."""
    return rules_from_effective(
        effective_rules(at=at), tiers=_tiers(), classes=_classes(), capacity=capacities()
    )


def rules_timeline(*, start: datetime, end: datetime) -> list[tuple[float, Rules]]:
    """One period per stretch of ``[start, end)`` in which the same grants are active."""
    moments = {start}
    grants = Grant.objects.filter(starts_at__lt=end, ends_at__gt=start).filter(
        Q(revoked_at__isnull=True) | Q(revoked_at__gt=start)
    )
    for grant in grants.only("starts_at", "ends_at", "revoked_at"):
        for moment in (grant.starts_at, grant.ends_at, grant.revoked_at):
            if moment is not None and start < moment < end:
                moments.add(moment)
    tiers, classes, capacity = _tiers(), _classes(), capacities()
    return [
        (
            moment.timestamp(),
            rules_from_effective(
                effective_rules(at=moment), tiers=tiers, classes=classes, capacity=dict(capacity)
            ),
        )
        for moment in sorted(moments)
    ]


@dataclass(frozen=True)
class Evidence:
    jobs: list[Job]
    skipped_never_started: int
    skipped_no_flavor: int
    # Each job's cluster (``WorkloadJob.cluster``; ``None``: not recorded), by index.
    clusters: list[int | None] = dataclasses.field(default_factory=list)


def jobs_from_evidence(*, start: datetime, end: datetime, project: str | None = None) -> Evidence:
    """The jobs submitted in ``[start, end)`` (of one project, or the site's), to replay."""
    maps = pool_maps()
    pools = dict(Pool.objects.values_list("pk", "slug"))
    rows = WorkloadJob.objects.filter(submitted_at__gte=start, submitted_at__lt=end)
    if project is not None:
        rows = rows.filter(project__slug=project)
    rows = rows.select_related("project", "tier", "flavor").order_by("submitted_at", "pk")
    jobs: list[Job] = []
    clusters: list[int | None] = []
    never = no_flavor = 0
    for row in rows.iterator(chunk_size=5000):
        pool = job_pool_id(job=row, maps=maps)
        if row.flavor is None or pool is None or row.gpus <= 0 or row.project is None:
            no_flavor += 1
            continue
        if row.started_at is None or row.submitted_at is None:
            never += 1
            continue
        finished = row.ended_at if row.ended_at is not None else end
        redone = row.gpu_seconds_lost / row.gpus if row.preemptions else 0.0
        duration = max(0.0, (finished - row.started_at).total_seconds() - redone)
        jobs.append(
            Job(
                name=row.job_id,
                arrival=row.submitted_at.timestamp(),
                gpus=float(row.gpus),
                flavor=flavor_key(pools[pool], row.flavor.slug),
                duration=duration,
                project=row.project.slug,
                tier=row.tier.slug if row.tier is not None else "",
                user=row.user_name,
            )
        )
        clusters.append(row.cluster_id)
    return Evidence(
        jobs=jobs, skipped_never_started=never, skipped_no_flavor=no_flavor, clusters=clusters
    )


# --- a proposed rule change, as the rules it would put in force --------------------------------


def _minutes(value: Any) -> float | None:
    return float(value) * MINUTE if value else None


@dataclass
class _Editing:
    """The rules a change's edits are applied to, by key, and the ids' keys."""

    tiers: dict[str, TierRule]
    classes: dict[str, ClassRule]
    quotas: dict[tuple[str, str], QuotaRule]
    capacity: dict[str, float]
    project_tiers: dict[str, str]
    tier_slugs: dict[int, str]
    tier_scores: dict[int, int]
    class_slugs: dict[int, str]


def _read_tier(edit: RuleEdit, rules: _Editing) -> None:
    slug = rules.tier_slugs[edit.object_id]
    changes = _tier_changes(edit.field, edit.new_value, rules.tier_slugs, rules.tier_scores)
    rules.tiers[slug] = dataclasses.replace(rules.tiers[slug], **changes)


def _read_quota(edit: RuleEdit, rules: _Editing) -> None:
    # A quota edit applies to that quota's project and flavor.
    row = Quota.objects.select_related("project", "pool", "flavor").get(pk=edit.object_id)
    key = (row.project.slug, flavor_key(row.pool.slug, row.flavor.slug))
    quota = rules.quotas.get(key) or QuotaRule(project=key[0], flavor=key[1], guarantee=0.0)
    changes = _quota_changes(edit.field, edit.new_value, rules.class_slugs)
    rules.quotas[key] = dataclasses.replace(quota, **changes)


def _read_class(edit: RuleEdit, rules: _Editing) -> None:
    slug = rules.class_slugs[edit.object_id]
    changes = _class_changes(edit.field, edit.new_value)
    rules.classes[slug] = dataclasses.replace(rules.classes[slug], **changes)


def _read_pool(edit: RuleEdit, rules: _Editing) -> None:
    if edit.key is None:  # the capacity is kept per flavor
        return
    pool = Pool.objects.get(pk=edit.object_id)
    flavor = GpuFlavor.objects.get(pk=edit.key)
    rules.capacity[flavor_key(pool.slug, flavor.slug)] = float(edit.new_value or 0)


def _read_project(edit: RuleEdit, rules: _Editing) -> None:
    project = Project.objects.get(pk=edit.object_id)
    if edit.new_value:
        rules.project_tiers[project.slug] = rules.tier_slugs[edit.new_value]
    else:
        rules.project_tiers.pop(project.slug, None)


# How the replay reads an edit of each rule kind that declares ``replay_fields`` (by its
# ``object_type``): a new kind the replay models adds its reader here
# (``tests/queues/test_replay_inputs.py`` checks that both name the same kinds).
READERS: dict[str, Callable[[RuleEdit, _Editing], None]] = {
    "tier": _read_tier,
    "quota": _read_quota,
    "preemption_class": _read_class,
    "pool": _read_pool,
    "project": _read_project,
}


def rules_with_change(rules: Rules, *, change: RuleChange) -> tuple[Rules, list[str]]:
    """``rules`` with the edits of ``change`` applied, and the edited fields a replay does
    not model (placement, access, descriptions, scheduler connections: ``model.field``).

    Edits name objects by id and store foreign keys as ids (``RuleEdit``); the slugs are
    looked up here. Which fields of which kind the replay models is the kind's declaration
    (``RuleKind.replay_fields``); ``READERS`` reads them.
    """
    edits = list(change.edits.select_related("content_type").order_by("pk"))
    editing = _Editing(
        tiers={tier.slug: tier for tier in rules.tiers},
        classes={cls.slug: cls for cls in rules.classes},
        quotas={(quota.project, quota.flavor): quota for quota in rules.quotas},
        capacity=dict(rules.capacity),
        project_tiers=dict(rules.project_tiers),
        tier_slugs=dict(PriorityTier.objects.values_list("pk", "slug")),
        tier_scores=dict(PriorityTier.objects.values_list("pk", "score")),
        class_slugs=dict(PreemptionClass.objects.values_list("pk", "slug")),
    )
    ignored: list[str] = []
    for edit in edits:
        model = edit.content_type.model_class()
        kind = rule_kind_for(model) if model is not None else None
        read = READERS.get(kind.object_type) if kind is not None else None
        if kind is None or read is None or edit.field not in kind.replay_fields:
            ignored.append(f"{edit.content_type.model}.{edit.field}")
            continue
        read(edit, editing)
    changed = dataclasses.replace(
        rules,
        tiers=tuple(editing.tiers.values()),
        classes=tuple(editing.classes.values()),
        quotas=tuple(editing.quotas.values()),
        capacity=editing.capacity,
        project_tiers=editing.project_tiers,
    )
    changed.check()
    return changed, ignored


def _tier_changes(
    field: str, value: Any, tier_slugs: dict[int, str], tier_scores: dict[int, int]
) -> dict[str, Any]:
    """A tier edit as the replay's ``TierRule`` fields (ids to slugs and scores)."""
    if field == "preemptible_tiers":
        return {"preemptible": frozenset(tier_slugs[pk] for pk in value or ())}
    if field == "aging_cap":
        return {"aging_cap": tier_scores[value] if value else None}
    if field == "aging_after_minutes":
        return {"aging_after": _minutes(value)}
    if field == "aging_step":
        return {"aging_step": value or 0}
    return {field: value}


def _quota_changes(field: str, value: Any, class_slugs: dict[int, str]) -> dict[str, Any]:
    """A quota edit as the replay's ``QuotaRule`` fields (GPUs as floats, minutes to seconds)."""
    if field == "preemption_class":
        return {"preemption_class": class_slugs[value]}
    if field == "reclaim_grace_minutes":
        return {"reclaim_grace": float(value or 0) * MINUTE}
    if field == "borrow_limit" or field == "lending_limit":
        return {field: None if value is None else float(value)}
    return {field: float(value)}


def _class_changes(field: str, value: Any) -> dict[str, Any]:
    """A preemption class edit as the replay's class fields (minutes to seconds)."""
    name = {
        "kind": "kind",
        "min_runtime_minutes": "min_runtime",
        "max_preemptions_per_day": "max_per_day",
        "max_checkpoint_interval_minutes": "checkpoint_interval",
    }[field]
    if name == "min_runtime":
        return {name: float(value or 0) * MINUTE}
    if name == "checkpoint_interval":
        return {name: _minutes(value)}
    if name == "max_per_day":
        return {name: value or None}
    return {name: value}


def slurm_conf_digests() -> dict[str, str]:
    """Per Slurm cluster that names a ``slurm.conf``, a digest of the file's content as
    ``scheduler_model`` reads it ("" when it cannot be read): a change replay's inputs, so that
    an edit of the file alone replays again instead of reusing a stored run."""
    digests = {}
    for name, path in (
        Cluster.objects.filter(backend="slurm")
        .exclude(slurm_conf="")
        .values_list("name", "slurm_conf")
    ):
        try:
            text = Path(path).read_text()
        except OSError:
            digests[name] = ""
            continue
        digests[name] = hashlib.sha256(text.encode()).hexdigest()
    return dict(sorted(digests.items()))


def scheduler_model(cluster: Any) -> SchedulerModel:
    """The replay model of ``cluster``'s scheduler: Slurm's with the settings of its
    ``slurm.conf`` (read from the path the cluster names; the tiers' scheduler values as
    their QOS priorities), or Kueue's (the scheduler values as the WorkloadPriorityClasses'
    values). A ``slurm.conf`` that cannot be read gives Slurm's defaults with the nodes left
    to the rules' capacities (each flavor one node)."""
    qos = {tier.slug: float(tier.scheduler_value) for tier in PriorityTier.objects.all()}
    if cluster.backend != "slurm":
        return SchedulerModel("kueue", priorities=qos)
    try:
        text = Path(cluster.slurm_conf).read_text() if cluster.slurm_conf else ""
    except OSError:
        text = ""
    return SchedulerModel("slurm", SlurmSettings.from_conf(text, qos_priority=qos))
