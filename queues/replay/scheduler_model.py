"""Which scheduler a replay models: ``replay(jobs, timeline, model=SchedulerModel(...))``.

``slurm`` (``slurm_model.SlurmReplay`` with the cluster's ``SlurmSettings``), ``kueue``
(``kueue_model.KueueReplay``: Kueue 0.17's BestEffortFIFO and fair sharing) or ``strict``
(the engine: Kueue's order kept strictly, what ``replay`` does without a model). No Django.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .engine import Replay, Result
from .kueue_cohort import KueueSettings
from .kueue_model import KueueReplay
from .rules import Job, Rules
from .slurm_conf import SlurmSettings
from .slurm_model import SlurmReplay

SCHEDULERS = ("slurm", "kueue", "strict")


@dataclass(frozen=True)
class SchedulerModel:
    """Which scheduler a replay models: ``slurm`` (``SlurmReplay``), ``kueue``
    (``kueue_model.KueueReplay``: Kueue's order, BestEffortFIFO) or ``strict`` (the engine:
    Kueue's order kept strictly, what ``replay`` does without a model). ``priorities``: per
    tier slug the WorkloadPriorityClass value Kueue orders by (the tier's scheduler value;
    None or a tier missing: its score)."""

    scheduler: str = "kueue"
    slurm: SlurmSettings | None = None
    priorities: Mapping[str, float] | None = None
    kueue: KueueSettings | None = None

    def replay(
        self, jobs: Sequence[Job], timeline: Sequence[tuple[float, Rules]], until: float | None
    ) -> Result:
        if self.scheduler == "slurm":
            return SlurmReplay(jobs, timeline, self.slurm or SlurmSettings()).run(until)
        if self.scheduler == "kueue":
            return KueueReplay(jobs, timeline, self.priorities, self.kueue).run(until=until)
        if self.scheduler != "strict":
            raise ValueError(f"no replay model for scheduler {self.scheduler!r}")
        return Replay(jobs, timeline).run(until=until)
