"""A deterministic discrete-event replay of GPU pools under Arbiter's rules (no Django).

What it models, and whose semantics each rule follows:

- **Pools and flavors.** Each flavor (``pool/flavor``) is a bucket of GPUs; a job asks for
  GPUs of one flavor (fractions allowed) and holds them for the duration it actually ran.
  No nodes: **node placement and fragmentation are not modelled**, nor **gang scheduling**
  across nodes (a job fits when the flavor has enough free GPUs).
- **Order** (Kueue's admission order): work within its project's guarantee first, then by
  effective score (the tier's score plus aging), then fair share, then arrival. The tier
  score dominates as a Slurm multifactor priority does with ``PriorityWeightQOS`` far above
  the other weights. A project is one queue ordered by tier (a Kueue ClusterQueue): its
  lower tier's work counts as within the guarantee only while none of the project's
  higher-tier work waits for the flavor, so it never passes its own project's higher tiers.
- **Aging** (Slurm ``PriorityWeightAge`` with ``PriorityMaxAge`` as the cap): every
  ``aging_after`` seconds of waiting add ``aging_step`` points, never above the cap's score.
  Aging only orders; preemption rights stay those of the job's own tier.
- **Fair share** (Kueue fair sharing): among equal scores the project borrowing the least per
  unit of weight goes first. Slurm's decayed historical usage is not modelled.
- **Strict order, no backfill** (Slurm's main scheduler without ``sched/backfill``): when the
  first job in order does not fit the free GPUs, no later borrowing job of that flavor
  starts (it waits on ``Priority``). Jobs held by a limit are skipped, as Slurm skips them.
  Only the first ``QUEUE_DEPTH`` jobs of one project and tier are looked at per pass
  (Slurm's ``default_queue_depth``). **Backfill is not modelled.**
- **Caps** (Slurm QOS and association limits): a tier's per-job cap (a job above it never
  starts: ``QOSMaxGRESPerJob``), the tier's total (``QOSGrpGRES``), per user
  (``QOSMaxGRESPerUser``) and the project's maximum = guarantee + borrow limit
  (``AssocGrpGRES``; Kueue ``borrowingLimit``).
- **Guarantees, borrowing and lending** (Kueue ``nominalQuota``, ``borrowingLimit``,
  ``lendingLimit`` in a cohort): a project borrows only what others lend (their idle
  guarantee up to their lending limit) plus the pool's unguaranteed GPUs. GPUs held idle by
  lending limits are a quota wait (``AccountingPolicy``). Never-preempt (forbidden) work
  never borrows: borrowed GPUs must be returnable.
- **Reclaim with grace** (Kueue ``reclaimWithinCohort``, Slurm ``GraceTime``): a job within
  its project's guarantee that does not fit because others borrow waits ``reclaim_grace``,
  then borrowers (projects over their guarantee) are preempted, youngest first, and the job
  starts in the same instant.
- **Preemption classes** (Slurm ``Preempt=``/``PreemptExemptTime``; Kueue
  ``withinClusterQueue``/``reclaimWithinCohort``): a tier that may preempt takes GPUs from
  running jobs of the tiers it lists, lowest score and youngest first; forbidden jobs are
  never preempted; cautious ones not before their minimum runtime; no job beyond its
  class's daily maximum. A preempted job is requeued (it keeps its tier and its place by
  arrival), loses the work since its last checkpoint (all of it without checkpoints) and
  pays the requeue cost; both count as GPU time lost.
- **Grants and rule changes**: the rules are a timeline (``[(from, Rules), ...]``); at each
  switch waiting jobs are re-evaluated (tier, caps, class); running jobs keep running, as
  Slurm and Kueue leave admitted work alone when limits drop.

Every wait is recorded with a Slurm reason token whose category is the evidence's
(``REASON_CATEGORY``; ``queues.schedulers.classify`` maps the same tokens).


The package: ``vocabulary`` (reason tokens, the result), and ``Replay`` built in layers of
whole methods: ``state`` (bookkeeping), ``admission``, ``preemption`` and ``run`` (the loop).
"""

from .run import Replay, replay
from .vocabulary import (
    DAY,
    EPS,
    JOB_CAP,
    LENDING,
    PRIORITY,
    PROJECT_MAX,
    QUEUE_DEPTH,
    REASON_CATEGORY,
    RESOURCES,
    TIER_CAP,
    USER_CAP,
    Result,
)

__all__ = [
    "DAY",
    "EPS",
    "JOB_CAP",
    "LENDING",
    "PRIORITY",
    "PROJECT_MAX",
    "QUEUE_DEPTH",
    "REASON_CATEGORY",
    "RESOURCES",
    "TIER_CAP",
    "USER_CAP",
    "Replay",
    "Result",
    "replay",
]
