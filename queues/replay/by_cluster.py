"""A change's replay cluster by cluster, each through the model of its cluster's scheduler.

The recorded jobs are grouped by the cluster they ran on (``WorkloadJob.cluster``; a job
without one goes to the one cluster serving its pool, if exactly one does). Each group is
replayed through the model of that cluster's scheduler (``adapt.scheduler_model``): a Slurm
cluster's through the Slurm model under its ``slurm.conf``, a Kueue cluster's through the
Kueue model. The engine (``queues.replay.engine``, Kueue's order kept strictly) replays a
group when there is no model for it — jobs of no cluster — or when the change edits a rule
the cluster's model does not model (``NOT_MODELLED``): the model would not see the edit, so
its answer would be "no difference". Each group says which model ran, and why the engine ran
when it did (``ClusterRun.as_json``, stored in the run's result under ``models``).

Where the model that ran does not model a rule the rules it ran under use (the Slurm model
and a lending limit, say), the group lists it (``not_modelled``): the page shows it, never
silently. The labels are here (translatable); the result stores the keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext_lazy as _

from governance.models import PriorityTier, Quota
from queues.models import Cluster

from .keys import flavor_key_split
from .rules import Job, Rules
from .scheduler_model import SchedulerModel

ENGINE = "engine"
SLURM = "slurm"
KUEUE = "kueue"
WITH_CHANGE = "with_change"  # ``queues.models.ReplaySide.WITH_CHANGE``
SCHEDULER_VALUE = "prioritytier.scheduler_value"

MODEL_LABELS = {
    SLURM: _("Slurm model (main scheduler and backfill)"),
    KUEUE: _("Kueue model (BestEffortFIFO, fair sharing)"),
    ENGINE: _("generic engine (strict order, no backfill)"),
}

# Why the engine replayed a group rather than its cluster's model.
NO_CLUSTER = "no_cluster"
NO_MODEL = "no_model"
LACKS = "lacks"
FALLBACK_LABELS = {
    NO_CLUSTER: _(
        "these jobs have no cluster (none recorded, and their pool is served by no cluster or "
        "by several)"
    ),
    NO_MODEL: _("there is no replay model for this cluster's scheduler"),
    LACKS: _("the change edits rules the cluster's scheduler model does not model:"),
}

# Per model, the rules it does not model, as edits name them (``<model>.<field>``); a
# ``periods`` entry: grants' periods (the first period's rules hold throughout).
PERIODS = "periods"
CAPACITY = "pool.capacity"
NOT_MODELLED: dict[str, dict[str, Any]] = {
    SLURM: {
        "quota.guarantee": _(
            "guarantees (Arbiter's guarantee and borrow QOS: work within its guarantee first); "
            "the Slurm model bounds a project only by its maximum"
        ),
        "quota.lending_limit": _("lending limits"),
        "quota.reclaim_grace_minutes": _("reclaim of a guarantee, with its grace (GraceTime)"),
        "prioritytier.aging_after_minutes": _(
            "a tier's aging (the Slurm model ages by PriorityWeightAge in slurm.conf)"
        ),
        "prioritytier.aging_step": _(
            "a tier's aging (the Slurm model ages by PriorityWeightAge in slurm.conf)"
        ),
        "prioritytier.aging_cap": _(
            "a tier's aging (the Slurm model ages by PriorityWeightAge in slurm.conf)"
        ),
        "preemptionclass.max_preemptions_per_day": _("a preemption class's daily maximum"),
        PERIODS: _("grants' periods (the rules at the window's start hold throughout)"),
        CAPACITY: _("a pool's capacity (the Slurm model schedules the nodes of slurm.conf)"),
    },
    KUEUE: {},
    ENGINE: {},
}


# Edits a model reads that the engine does not (the result's ``not_modelled`` lists them).
MODEL_EDIT_LABELS = {
    SCHEDULER_VALUE: _(
        "a tier's scheduler value (its Slurm QOS priority, its Kueue WorkloadPriorityClass value)"
    ),
}


def not_modelled_label(model: str, key: str) -> Any:
    return NOT_MODELLED.get(model, {}).get(key, key)


@dataclass
class ClusterRun:
    """One group of jobs and the model that replays it."""

    cluster: str  # the cluster's name; "" for jobs of no cluster
    scheduler: str  # the cluster's backend; ""
    model: str  # SLURM, KUEUE or ENGINE
    scheduler_model: SchedulerModel | None  # None: the engine
    jobs: list[Job] = field(default_factory=list)
    fallback: str = ""  # why the engine ran (NO_CLUSTER, NO_MODEL, LACKS); "" when it did not
    fallback_fields: list[str] = field(default_factory=list)  # the edits the model lacks
    not_modelled: list[str] = field(default_factory=list)  # rules in use the model lacks
    # The model of the side with the change, when the change edits what the model reads
    # beside the rules (a tier's scheduler value: its QOS priority, its WorkloadPriorityClass
    # value); else the same.
    changed_model: SchedulerModel | None = None
    # Edits only this model reads (the engine does not: the result's ``not_modelled``).
    model_edits: list[str] = field(default_factory=list)

    def model_of(self, side: str) -> SchedulerModel | None:
        if side == WITH_CHANGE and self.changed_model is not None:
            return self.changed_model
        return self.scheduler_model

    def as_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "scheduler": self.scheduler,
            "model": self.model,
            "jobs": len(self.jobs),
            "fallback": self.fallback,
            "fallback_fields": self.fallback_fields,
            "not_modelled": self.not_modelled,
            "model_edits": self.model_edits,
        }


def _in_use(key: str, rules: Rules, flavors: set[str], periods: int) -> bool:
    """Whether ``rules`` (on ``flavors``) use the rule ``key`` names."""
    quotas = [quota for quota in rules.quotas if quota.flavor in flavors]
    if key == PERIODS:
        return periods > 1
    if key == "quota.guarantee":
        return any(quota.guarantee > 0 for quota in quotas)
    if key == "quota.lending_limit":
        return any(quota.lending_limit is not None for quota in quotas)
    if key == "quota.reclaim_grace_minutes":
        return any(quota.reclaim_grace > 0 for quota in quotas)
    if key.startswith("prioritytier.aging"):
        return any(tier.aging_after and tier.aging_step for tier in rules.tiers)
    if key == "preemptionclass.max_preemptions_per_day":
        return any(cls.max_per_day for cls in rules.classes)
    return False


def _edited(
    edits: Sequence[Sequence[Any]], pools: set[int], quota_pools: dict[int, int]
) -> set[str]:
    """The rules (``<model>.<field>``) of ``edits`` that reach the cluster of ``pools``:
    a quota's or a pool's edit only when it is of one of them; tiers and classes always."""
    touched = set()
    for model, object_id, name, _key, _value in edits:
        if model == "quota" and quota_pools.get(object_id) not in pools:
            continue
        if model == "pool" and object_id not in pools:
            continue
        touched.add(f"{model}.{name}")
    return touched


def _pick(
    cluster: Cluster | None,
    jobs: list[Job],
    *,
    edits: Sequence[Sequence[Any]],
    quota_pools: dict[int, int],
    sides: Sequence[Sequence[tuple[float, Rules]]],
) -> ClusterRun:
    from .adapt import scheduler_model  # here: adapt imports this package's siblings

    if cluster is None:
        return ClusterRun("", "", ENGINE, None, jobs, fallback=NO_CLUSTER)
    model = scheduler_model(cluster)
    if model.scheduler not in (SLURM, KUEUE):
        return ClusterRun(cluster.name, cluster.backend, ENGINE, None, jobs, fallback=NO_MODEL)
    lacks = set(NOT_MODELLED[model.scheduler]) - {PERIODS}
    if model.scheduler == SLURM and not (model.slurm and model.slurm.nodes):
        lacks.discard(CAPACITY)  # without nodes in slurm.conf it schedules the capacities
    pools = {pool.pk for pool in cluster.pools.all()}
    touched = sorted(_edited(edits, pools, quota_pools) & lacks)
    if touched:
        return ClusterRun(
            cluster.name,
            cluster.backend,
            ENGINE,
            None,
            jobs,
            fallback=LACKS,
            fallback_fields=touched,
        )
    # The rules of the cluster's pools: those its scheduler enforces.
    slugs = {pool.slug for pool in cluster.pools.all()}
    flavors = {
        key
        for side in sides
        for _at, rules in side[:1]
        for key in rules.capacity
        if flavor_key_split(key)[0] in slugs
    }
    missing = sorted(
        key
        for key in NOT_MODELLED[model.scheduler]
        if key != CAPACITY
        and any(_in_use(key, side[0][1], flavors, len(side)) for side in sides if side)
    )
    picked = ClusterRun(
        cluster.name, cluster.backend, model.scheduler, model, jobs, not_modelled=missing
    )
    _with_scheduler_values(picked, model, edits)
    return picked


def _with_scheduler_values(
    picked: ClusterRun, model: SchedulerModel, edits: Sequence[Sequence[Any]]
) -> None:
    """Slurm orders by the QOS priority the sync writes and Kueue by the WorkloadPriorityClass
    value it writes, both the tier's scheduler value (not its score): a change of it is the
    side with the change's model."""
    values = {
        object_id: value
        for kind, object_id, name, _key, value in edits
        if f"{kind}.{name}" == SCHEDULER_VALUE and value is not None
    }
    if not values:
        return
    slugs = dict(PriorityTier.objects.filter(pk__in=values).values_list("pk", "slug"))
    changed = {slugs[pk]: float(value) for pk, value in values.items() if pk in slugs}
    if model.scheduler == SLURM and model.slurm is not None:
        qos = {**model.slurm.qos_priority, **changed}
        settings = dataclasses.replace(model.slurm, qos_priority=qos)
        picked.changed_model = SchedulerModel(SLURM, settings)
    elif model.scheduler == KUEUE:
        priorities = {**(model.priorities or {}), **changed}
        picked.changed_model = SchedulerModel(KUEUE, priorities=priorities)
    else:
        return
    picked.model_edits = [SCHEDULER_VALUE]


def cluster_runs(
    *,
    jobs: Sequence[Job],
    clusters: Sequence[int | None],
    edits: Sequence[Sequence[Any]],
    sides: Sequence[Sequence[tuple[float, Rules]]],
) -> list[ClusterRun]:
    """The jobs (with their clusters, by index) grouped by cluster, each group with the model
    that replays it; ``edits`` are the change's (``[model, object id, field, key, value]``),
    ``sides`` the timelines replayed (to tell which rules the model lacks are in use)."""
    known = {cluster.pk: cluster for cluster in Cluster.objects.prefetch_related("pools")}
    by_pool: dict[str, list[int]] = {}
    for cluster in known.values():
        for pool in cluster.pools.all():
            by_pool.setdefault(pool.slug, []).append(cluster.pk)
    groups: dict[int | None, list[Job]] = {}
    for index, job in enumerate(jobs):
        pk = clusters[index] if index < len(clusters) else None
        if pk is None:
            serving = by_pool.get(flavor_key_split(job.flavor)[0], [])
            pk = serving[0] if len(serving) == 1 else None
        groups.setdefault(pk if pk in known else None, []).append(job)
    quota_ids = [object_id for model, object_id, *_rest in edits if model == "quota"]
    quota_pools = dict(Quota.objects.filter(pk__in=quota_ids).values_list("pk", "pool_id"))
    order = sorted(groups, key=lambda pk: (pk is None, known[pk].name if pk is not None else ""))
    return [
        _pick(
            known.get(pk) if pk is not None else None,
            groups[pk],
            edits=edits,
            quota_pools=quota_pools,
            sides=sides,
        )
        for pk in order
    ]
