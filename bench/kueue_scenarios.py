"""The quotas of a Kueue fidelity run: one source for the lab's objects and the replay's rules.

A ``Scenario`` names the projects, their tier and, per GPU type (the same on both), their
guarantee, lending limit and whether their work may never be preempted; and the GPUs per
type of the whole pool. ``bench/fidelity_kueue.py`` makes the lab's objects from it
(``KueueLab.setup``: per project a ClusterQueue ``fid-<project>`` in cohort ``fid``,
``nominalQuota`` = the guarantee, ``lendingLimit`` when the project has one, ``borrowingLimit:
0`` for never-preempt work, as Arbiter's sync writes them; the cohort holds the GPUs no project
is guaranteed) and the replay's ``Rules`` (``kueue_rules``: a ``QuotaRule`` per project and
flavor with the same figures; never-preempt projects in a ``forbidden`` class). When a
project has a guarantee the ClusterQueues reclaim it (``reclaimWithinCohort: Any``, as Arbiter
exports and as the model always does); without any, they do not (the lab's first scenario).

- ``DEFAULT``: one project per tier, no guarantee (everything borrowed from the cohort of
  4 + 4 GPUs): the lab's scenario since the benchmark began, unchanged.
- ``QUOTAS``: 5 + 5 GPUs; ``p-key`` guaranteed 2 per type but lending at most 1 of them,
  ``p-regular`` guaranteed 1, ``p-steady`` (exploratory work that may never be preempted:
  the 1-GPU jobs of that tier) guaranteed 1 and never borrowing, ``p-exploratory`` (the
  tier's other jobs) none; the cohort holds 1 per type. Every job can start at some time:
  the most the others can get is 5 less the GPU ``p-key``'s lending limit holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from queues.replay.mixes import LabJob

from .fidelity_slurm import PRIORITIES

NEVER = "never"  # the preemption class of never-preempt projects in the replay's rules


@dataclass(frozen=True)
class Project:
    name: str  # the project's slug: namespace and ClusterQueue ``fid-<name>``
    tier: str
    guarantee: int = 0  # GPUs per GPU type (``nominalQuota``)
    lending_limit: int | None = None  # None: lends all of its idle guarantee
    never_preempt: bool = False  # ``borrowingLimit: 0``; a forbidden class in the replay
    largest_job: int | None = None  # takes its tier's jobs of at most this many GPUs
    within: bool = False  # ``withinClusterQueue: LowerPriority`` (else ``Never``)
    weight: int = 1  # ``fairSharing.weight``
    also: tuple[str, ...] = ()  # lower tiers it sends work of too (as the bench's projects)


@dataclass(frozen=True)
class Scenario:
    name: str
    projects: tuple[Project, ...]
    gpus: int = 4  # per GPU type, the whole pool
    priorities: Mapping[str, int] = field(default_factory=lambda: dict(PRIORITIES))

    def __post_init__(self) -> None:
        if self.cohort_gpus < 0:
            raise ValueError(f"scenario {self.name!r} guarantees more than {self.gpus} GPUs")
        for project in self.projects:
            if project.tier not in self.priorities:
                raise ValueError(f"project {project.name!r} has unknown tier {project.tier!r}")

    @property
    def cohort_gpus(self) -> int:
        """Per GPU type, the GPUs no project is guaranteed (the cohort's own quota)."""
        return self.gpus - sum(project.guarantee for project in self.projects)

    @property
    def reclaim(self) -> bool:
        return any(project.guarantee for project in self.projects)

    def of_tier(self, tier: str) -> list[Project]:
        return [project for project in self.projects if project.tier == tier]

    def place(self, job: LabJob) -> LabJob:
        """The job in the first project of its tier that takes it (kept if it names one);
        when projects send lower tiers' work too (``also``), in one of those that take it,
        picked by the job's own figures (the same job, the same project)."""
        if job.in_project:
            return job
        takers = [
            project
            for project in self.projects
            if (project.tier == job.tier or job.tier in project.also)
            and (project.largest_job is None or job.gpus <= project.largest_job)
        ]
        if not takers:
            raise ValueError(f"no project of scenario {self.name!r} takes {job}")
        if not any(project.also for project in self.projects):
            return replace(job, in_project=takers[0].name)
        pick = int(job.offset * 10) + job.seconds + job.gpus
        return replace(job, in_project=takers[pick % len(takers)].name)


DEFAULT = Scenario("default", tuple(Project(f"p-{tier}", tier) for tier in PRIORITIES))
QUOTAS = Scenario(
    "quotas",
    (
        Project("p-key", "key", guarantee=2, lending_limit=1),
        Project("p-regular", "regular", guarantee=1),
        Project("p-steady", "exploratory", guarantee=1, never_preempt=True, largest_job=1),
        Project("p-exploratory", "exploratory"),
    ),
    gpus=5,
)
# The benchmark pool's shape (``bench/replay.py``) scaled to the lab: guarantees of 4 of the
# 5 GPUs per type, fair-sharing weights 1–3, a lending limit, a key project that preempts its
# own lower priorities (``withinClusterQueue: LowerPriority``), projects that send their
# tier's and the next lower tier's work, and one with no guarantee.
BUSY = Scenario(
    "busy",
    (
        Project("p-key", "key", guarantee=1, within=True, also=("regular",)),
        Project("p-reg", "regular", guarantee=1, weight=2, also=("exploratory",)),
        Project("p-reg2", "regular", guarantee=2, lending_limit=1, weight=3),
        Project("p-expl", "exploratory"),
    ),
    gpus=5,
)
SCENARIOS = {scenario.name: scenario for scenario in (DEFAULT, QUOTAS, BUSY)}
