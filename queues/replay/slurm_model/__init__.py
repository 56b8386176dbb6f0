"""A replay that schedules as Slurm does: ``slurm_replay(jobs, timeline, settings)``.

Picked for a cluster run by Slurm through ``scheduler_model.SchedulerModel("slurm", ...)``,
with the settings of its ``slurm.conf`` (``slurm_conf.SlurmSettings``). It follows Slurm
22.05's multifactor priority (age, Fair Tree fair share, QOS = the tier), its passes as
slurmctld times them (a submission waits for the next pass; the main scheduler runs every
``sched_interval`` (and, with an ``Epilog``, when an ended job's GPUs come back; without
one, the next pass of either scheduler uses them): priority order, held jobs skipped,
the first job that does not fit blocks the partition; backfill every ``bf_interval``: time
limits, whole-node reservations within ``bf_window`` floored to ``bf_resolution``), nodes
with typed GPUs (first fit), time limits, QOS preemption with requeue. Layers: ``state``
(jobs, nodes, queue, use, limits), ``passes`` (main, backfill, preemption), ``plan`` (one
backfill pass's reservations). What it models and not, its calibration: docs/replay.md.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from ..engine import Result
from ..rules import Job, Rules
from ..slurm_conf import SlurmSettings
from .passes import SlurmPasses
from .state import _ARRIVE, _ELIGIBLE, _END, _MAIN, _RELEASE, BACKFILL, MAIN, gres_type

__all__ = ["BACKFILL", "MAIN", "SlurmReplay", "gres_type", "slurm_replay"]


class SlurmReplay(SlurmPasses):
    """Slurm's scheduling of ``jobs`` under the first period's rules of ``timeline``."""

    def run(self, until: float | None = None) -> Result:
        jobs = self.jobs
        order = sorted(range(len(jobs)), key=lambda j: (jobs[j].arrival, j))
        begin = min([jobs[order[0]].arrival] if order else [0.0])
        self.begin = begin
        self.now = begin
        for j in order:
            self._push(jobs[j].arrival, _ARRIVE, j)
        heap = self.heap
        while heap:
            t, kind, _seq, j, token = heapq.heappop(heap)
            if until is not None and t > until:
                heapq.heappush(heap, (t, kind, _seq, j, token))
                break
            self.now = t
            if kind == _END:
                if token == self.token[j] and j in self.running:
                    self.remaining[j] = 0.0
                    self.end[j] = t
                    self.token[j] += 1  # its GPUs come back ``end_delay`` later
                    self._push(t + self.s.end_delay, _RELEASE, j, self.token[j])
            elif kind == _RELEASE:
                if token == self.token[j] and j in self.running:
                    self._stop(j, t)
            elif kind in (_ARRIVE, _ELIGIBLE):
                self._enqueue(j, t)
                self._trigger(t)
            elif kind == _MAIN:
                self.queued.discard((t, kind))
                self._main(t)
            else:
                self.queued.discard((t, kind))
                if len(self.pending) > self.dead:
                    self._backfill(t)
        horizon = self.now if until is None else until
        self._account(horizon)
        runs = list(self.runs) + [(j, self.run_start[j], horizon) for j in sorted(self.running)]
        return Result(
            jobs=jobs,
            start=self.start,
            end=self.end,
            preemptions=self.preemptions,
            lost_gpu_seconds=self.lost,
            tiers=[tier.slug for tier in self.tier],
            reasons=self.reasons,
            runs=runs,
            used_gpu_seconds=dict(self.used),
            borrowed_gpu_seconds=dict(self.borrowed),
            idle_gpu_seconds=dict(self.idle),
            begin=begin,
            horizon=horizon,
            preempted_by=self.preempted_by,
            classes=[cls.slug for cls in self.cls],
        )


def slurm_replay(
    jobs: Sequence[Job],
    timeline: Sequence[tuple[float, Rules]],
    settings: SlurmSettings,
    until: float | None = None,
) -> Result:
    """Replay ``jobs`` as Slurm with ``settings`` would schedule them (the first period's rules)."""
    return SlurmReplay(jobs, timeline, settings).run(until)
