"""The replay's loop: one scheduling pass per event, the run to the horizon, and its result."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import Protocol

from ..rules import Job, Rules
from .preemption import _Preemption
from .vocabulary import (
    _CANCEL,
    _END,
    EPS,
    LENDING,
    PRIORITY,
    RESOURCES,
    Result,
)


class SchedulerReplay(Protocol):
    """A scheduler's model of the replay (``queues.replay.scheduler_model.SchedulerModel``)."""

    def replay(
        self, jobs: Sequence[Job], timeline: Sequence[tuple[float, Rules]], until: float | None
    ) -> Result: ...


class Replay(_Preemption):
    """One replay. ``Replay(jobs, timeline).run(until=...)`` returns a :class:`Result`."""

    def _pass(self, name: str, t: float) -> None:
        flavor = self.flavors[name]
        if t >= flavor.next_expiry:  # aging raised some queues' first jobs
            soonest = math.inf
            for key, until in list(flavor.expiry.items()):
                if until <= t:
                    flavor.stale.add(key)
                    del flavor.expiry[key]
                elif until < soonest:
                    soonest = until
            flavor.next_expiry = soonest
        if flavor.held:  # held by lending limits: lending changes with every start and end
            flavor.stale |= flavor.held
            flavor.held = set()
        entries = flavor.entries
        blocker = None
        while True:
            if flavor.stale:
                # In a fixed order, not the set's: the order decides which wakes are pushed,
                # and a set of strings iterates in an order that changes with the process's
                # hash seed (the same replay in two processes would differ).
                stale = sorted(flavor.stale)
                flavor.stale = set()
                for key in stale:
                    self._candidate(name, flavor, key, t)
            if not entries:
                break
            entry, key, pos = min(entries.values())
            j = flavor.groups[key][pos]
            gpus = self.jobs[j].gpus
            lending = self._lending(j, flavor)
            if lending == LENDING:
                self._say(j, LENDING, t)
                del entries[key]
                flavor.unswept.discard(key)
                flavor.within.discard(key)
                flavor.held.add(key)
                continue
            how = ""
            if lending is None and flavor.free + EPS >= gpus:
                how = "free"
            elif lending is None and self._try_preempt(j, flavor, name, t):
                how = "tier"
            elif entry[0] == 0 and self._try_reclaim(j, flavor, name, t):
                how = "reclaim"
            if not how:
                self._say(j, RESOURCES, t)
                blocker = key
                break
            self._begin(j, flavor, name, t)
        if flavor.blocker is not None and flavor.blocker != blocker and flavor.blocker in entries:
            flavor.unswept.add(flavor.blocker)
        flavor.blocker = blocker
        if blocker is None:
            return
        # Strict order behind the blocker: the rest wait on Priority, except work within its
        # guarantee, which may still take lent GPUs back.
        flavor.unswept.discard(blocker)
        groups = flavor.groups
        for key in sorted(flavor.unswept):
            if key not in flavor.within:
                self._say(groups[key][entries[key][2]], PRIORITY, t)
        flavor.unswept = set()
        for key in sorted(flavor.within):
            if key == blocker or key not in entries:
                continue
            entry, _, pos = entries[key]
            j = groups[key][pos]
            if self._try_reclaim(j, flavor, name, t):
                self._begin(j, flavor, name, t)
                self.dirty.add(name)
                return
            self._say(j, RESOURCES if flavor.free + EPS < self.jobs[j].gpus else PRIORITY, t)

    def run(self, until: float | None = None) -> Result:
        jobs = self.jobs
        order = sorted(range(self.n), key=lambda j: (jobs[j].arrival, j))
        begin = min([self.timeline[0][0]] + ([jobs[order[0]].arrival] if order else []))
        self.dirty: set[str] = set()
        self.wake_flavor: dict[int, str] = {}
        self.now = begin
        self._apply(self.timeline[0][1], begin)
        switches = [at for at, _ in self.timeline]
        si = 1
        ai = 0
        heap = self.heap
        while True:
            t = math.inf
            if ai < self.n:
                t = jobs[order[ai]].arrival
            if heap and heap[0][0] < t:
                t = heap[0][0]
            if si < len(switches) and switches[si] < t:
                t = switches[si]
            if t == math.inf or (until is not None and t > until):
                break
            self.now = t
            while heap and heap[0][0] <= t:
                _, seq, kind, j, token = heapq.heappop(heap)
                if kind == _END:
                    if token == self.token[j]:
                        self._stop(j, t)
                        self.end[j] = t
                        self.remaining[j] = 0.0
                elif kind == _CANCEL:
                    self._cancel(j, t)
                else:
                    self.dirty.add(self.wake_flavor.pop(seq))
            while si < len(switches) and switches[si] <= t:
                self._apply(self.timeline[si][1], t)
                si += 1
            while ai < self.n and jobs[order[ai]].arrival <= t:
                j = order[ai]
                self._enqueue(j, t, fresh=True)
                patience = jobs[j].patience
                if patience is not None:
                    self._push(jobs[j].arrival + patience, _CANCEL, j, 0)
                ai += 1
            while self.dirty:
                name = min(self.dirty)
                self.dirty.discard(name)
                self._pass(name, t)
            for j in self.behind:
                if self.reason[j] is None and j not in self.flavors[jobs[j].flavor].running:
                    self._say(j, PRIORITY, t)
            self.behind = []
        horizon = self.now if until is None else until
        return self._result(begin, horizon)

    def _result(self, begin: float, horizon: float) -> Result:
        runs = list(self.runs)
        for flavor_name, flavor in self.flavors.items():
            self._tick_flavor(flavor, horizon)
            for project in flavor.usage:
                self._tick_project(project, flavor_name, flavor, horizon)
            for j in sorted(flavor.running):
                runs.append((j, self.run_start[j], horizon))
        return Result(
            jobs=self.jobs,
            start=self.start,
            end=self.end,
            preemptions=self.preemptions,
            lost_gpu_seconds=self.lost,
            tiers=[tier.slug if tier is not None else "" for tier in self.tier],
            reasons=self.reasons,
            runs=runs,
            used_gpu_seconds=dict(self.used),
            borrowed_gpu_seconds=dict(self.borrowed_seconds),
            idle_gpu_seconds={name: flavor.idle for name, flavor in self.flavors.items()},
            begin=begin,
            horizon=horizon,
            preempted_by=self.preempted_by,
            cancelled=self.cancelled,
            classes=[cls.slug if cls is not None else "" for cls in self.cls],
        )


def replay(
    jobs: Sequence[Job],
    timeline: Sequence[tuple[float, Rules]],
    until: float | None = None,
    model: SchedulerReplay | None = None,
) -> Result:
    """Replay ``jobs`` under the rules of ``timeline`` (``[(from, Rules), ...]``); ``model``
    (``queues.replay.scheduler_model.SchedulerModel``) picks the cluster's scheduler's model."""
    if model is not None:
        return model.replay(jobs, timeline, until)
    return Replay(jobs, timeline).run(until=until)
