"""One backfill pass's plan of the Slurm model (Slurm's ``node_space``)."""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from typing import TYPE_CHECKING

from ..rules import TierRule
from ..slurm_conf import INFINITE
from .state import EPS

if TYPE_CHECKING:
    from .state import SlurmState


class BackfillPlan:
    """One backfill pass's plan (Slurm's ``node_space``): per node, the windows reserved for
    higher jobs, floored to ``bf_resolution`` as Slurm stores them; per job shape (GPU type,
    GPUs, time limit) the nodes in the order their GPUs free up. Within a pass nothing frees:
    a shape that found no place within the window finds none later in the pass either."""

    def __init__(self, replay: SlurmState, t: float, order: list[int]) -> None:
        self.r = replay
        self.t = t
        self.order = order
        self.res = replay.s.bf_resolution or 1.0
        self.horizon = t + replay.s.bf_window
        self.reserved: dict[int, list[tuple[float, float]]] = {}
        self.frees: dict[tuple[str, float], list[tuple[float, int]]] = {}
        self.whens: dict[tuple[str, float], dict[int, float]] = {}
        self.dead: set[tuple[str, float, float]] = set()
        self.starts = 0
        self.failed_preempt: dict[tuple[str, str, float], int] = {}

    def may_preempt(self, tier: TierRule, shape: tuple[str, float, float]) -> bool:
        """Whether a job of ``tier`` and ``shape`` is worth a preemption attempt: its tier may
        preempt, and no attempt of the same failed since the last start in this pass (the
        running jobs it could preempt are the same)."""
        if not tier.may_preempt:
            return False
        key = (tier.slug, shape[0], shape[1])
        if self.failed_preempt.get(key) == self.starts:
            return False
        self.failed_preempt[key] = self.starts  # a success ends the pass
        return True

    def give_up(self, shape: tuple[str, float, float]) -> None:
        self.dead.add(shape)

    def changed(self, node: int, kind: str) -> None:
        """A job of ``kind`` started on ``node``: its place in the free-up orders moves."""
        self.starts += 1
        for (of_kind, gpus), frees in self.frees.items():
            if of_kind != kind:
                continue
            whens = self.whens[(of_kind, gpus)]
            old = whens.pop(node, None)
            if old is not None:
                del frees[bisect_left(frees, (old, node))]
            when = self._when(node, kind, gpus)
            if when is not None:
                whens[node] = when
                insort(frees, (when, node))

    def _when(self, i: int, kind: str, gpus: float) -> float | None:
        """When ``gpus`` GPUs of ``kind`` are free on node ``i`` by the running jobs' limits
        (None: the node never has that many)."""
        when = self.r.free_at(i, kind, gpus)
        return None if when is None else max(self.t, when)

    def _frees(self, kind: str, gpus: float) -> list[tuple[float, int]]:
        """(when ``gpus`` GPUs of ``kind`` are free, node) for every planned node that has that
        many, soonest first."""
        key = (kind, gpus)
        found = self.frees.get(key)
        if found is not None:
            return found
        whens = {}
        for i in self.order:
            when = self._when(i, kind, gpus)
            if when is not None:
                whens[i] = when
        out = sorted((when, i) for i, when in whens.items())
        self.frees[key] = out
        self.whens[key] = whens
        return out

    def _clash(self, node: int, start: float, limit: float) -> float:
        """The end of the first reservation on ``node`` that a run from ``start`` for ``limit``
        overlaps (Slurm: a window that ends after the start and begins by the run's end), or
        -1 when none does."""
        finish = start + limit
        for a, b in self.reserved.get(node, ()):
            if b > start + EPS and a <= finish + EPS:
                return b
        return -1.0

    def earliest(self, shape: tuple[str, float, float]) -> tuple[float, int]:
        """The earliest start within the window for a job of ``shape`` on a planned node, and
        the node; (inf, -1) if none. Now (the pass's time) means it can start."""
        kind, gpus, limit = shape
        r, t = self.r, self.t
        for i in self.order:  # a node free now, first by index: Slurm starts the job there
            if r.free[i].get(kind, 0.0) + EPS >= gpus and self._clash(i, t, limit) < 0:
                return t, i
        best, where = INFINITE, -1
        for when, i in self._frees(kind, gpus):
            if when >= best or when > self.horizon:
                break
            start = when
            while start < best and start <= self.horizon:
                after = self._clash(i, start, limit)
                if after < 0:
                    best, where = start, i
                    break
                start = after
        return best, where

    def reserve(self, node: int, when: float, limit: float) -> None:
        res = self.res
        a = math.floor(when / res) * res
        b = when + limit
        b = max(a + res, math.floor(b / res) * res) if b < INFINITE else INFINITE
        self.reserved.setdefault(node, []).append((a, b))
