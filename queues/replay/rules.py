"""The rules a replay runs under: plain, frozen values (no Django), one set per period.

``queues.replay.adapt`` builds them from the effective rules (``governance.selectors.
effective``), so a replay reads the rules through the same function as the sync and the API;
tests and benchmarks build them directly. Times are seconds (floats), GPUs are floats (a
fraction of a GPU is allowed), tiers, classes, projects and flavors are named by slug.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ALLOWED = "allowed"
CAUTIOUS = "cautious"
FORBIDDEN = "forbidden"
KINDS = (ALLOWED, CAUTIOUS, FORBIDDEN)


@dataclass(frozen=True)
class ClassRule:
    """A preemption class: who may lose GPUs, when, and what it costs."""

    slug: str
    kind: str = ALLOWED
    # Cautious: not preempted before it has run this long (Slurm ``PreemptExemptTime``).
    min_runtime: float = 0.0
    # Not preempted more often than this per UTC day (None: no maximum).
    max_per_day: int | None = None
    # Work since the last checkpoint is lost on preemption; None: all the work is lost.
    checkpoint_interval: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown preemption kind {self.kind!r}")


@dataclass(frozen=True)
class TierRule:
    slug: str
    score: int
    max_gpus_per_job: float | None = None
    max_gpus_total: float | None = None
    # Arbiter compiles the per-job cap into Slurm's MaxTRESPerUser too (see the adapter).
    max_gpus_per_user: float | None = None
    may_preempt: bool = False
    preemptible: frozenset[str] = frozenset()
    # Every ``aging_after`` seconds of waiting raise the job by ``aging_step`` score points,
    # never above ``aging_cap`` (a score; required with aging, as a tier's own rule requires
    # it: ``Rules.check``). Aging orders, it never lets preempt.
    aging_after: float | None = None
    aging_step: int = 0
    aging_cap: int | None = None


@dataclass(frozen=True)
class QuotaRule:
    """What one project may use of one flavor (a flavor here is ``pool/flavor``)."""

    project: str
    flavor: str
    guarantee: float
    borrow_limit: float | None = None  # None: may borrow whatever is lent
    lending_limit: float | None = None  # None: lends all of its idle guarantee
    fair_share_weight: float = 1.0
    reclaim_grace: float = 0.0
    preemption_class: str = ""

    @property
    def maximum(self) -> float | None:
        return None if self.borrow_limit is None else self.guarantee + self.borrow_limit


@dataclass(frozen=True)
class Rules:
    """The effective rules of one period."""

    capacity: dict[str, float]  # flavor -> GPUs
    tiers: tuple[TierRule, ...]
    classes: tuple[ClassRule, ...]
    quotas: tuple[QuotaRule, ...] = ()
    project_tiers: dict[str, str] = field(default_factory=dict)  # project -> top tier
    default_tier: str = ""
    # A project without a quota on a flavor: no guarantee, may borrow, this class.
    default_class: str = ""
    # Grants naming jobs: a higher tier, a stricter class.
    job_tiers: dict[str, str] = field(default_factory=dict)
    job_classes: dict[str, str] = field(default_factory=dict)
    # Seconds a preempted job spends restarting (added to its remaining run).
    requeue_cost: float = 0.0

    def tier(self, slug: str) -> TierRule:
        for tier in self.tiers:
            if tier.slug == slug:
                return tier
        raise KeyError(slug)

    def check(self) -> None:
        """Refuse rules that name what they do not define (a clear error, not a KeyError)."""
        tiers = {tier.slug for tier in self.tiers}
        classes = {cls.slug for cls in self.classes}
        if not self.tiers:
            raise ValueError("rules need at least one tier")
        if self.default_tier and self.default_tier not in tiers:
            raise ValueError(f"default tier {self.default_tier!r} is not a tier")
        if self.default_class and self.default_class not in classes:
            raise ValueError(f"default class {self.default_class!r} is not a class")
        for tier in self.tiers:
            if tier.aging_after and tier.aging_step and tier.aging_cap is None:
                # As a tier's own rule requires (``PriorityTier``): a job that can never
                # start would otherwise age, step after step, forever.
                raise ValueError(f"tier {tier.slug!r} ages without a cap")
            unknown = tier.preemptible - tiers
            if unknown:
                raise ValueError(f"tier {tier.slug!r} may preempt unknown tiers {sorted(unknown)}")
        for quota in self.quotas:
            if quota.flavor not in self.capacity:
                raise ValueError(
                    f"quota of {quota.project!r} names unknown flavor {quota.flavor!r}"
                )
            if quota.preemption_class and quota.preemption_class not in classes:
                raise ValueError(
                    f"quota of {quota.project!r} names unknown class {quota.preemption_class!r}"
                )
        for project, slug in self.project_tiers.items():
            if slug not in tiers:
                raise ValueError(f"project {project!r} has unknown tier {slug!r}")
        for job, slug in self.job_tiers.items():
            if slug not in tiers:
                raise ValueError(f"job {job!r} is raised to unknown tier {slug!r}")
        for job, slug in self.job_classes.items():
            if slug not in classes:
                raise ValueError(f"job {job!r} is protected by unknown class {slug!r}")


@dataclass(frozen=True, slots=True)
class Job:
    """One job to replay. ``duration`` is what actually ran (not the time limit asked)."""

    name: str
    arrival: float
    gpus: float
    flavor: str
    duration: float
    project: str
    tier: str = ""  # requested; "" means the project's tier
    user: str = ""
    # The user cancels it if it has not started this many seconds after arrival (None: never).
    patience: float | None = None
    # The time limit it asked for (Slurm ``--time``; None: the partition's default). Only the
    # Slurm model reads it: backfill plans with it and a job is ended at it.
    time_limit: float | None = None
