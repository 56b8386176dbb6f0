"""The Slurm model's passes: the main scheduler, backfill and QOS preemption."""

from __future__ import annotations

from ..engine import RESOURCES
from ..rules import CAUTIOUS, FORBIDDEN
from .plan import BackfillPlan
from .state import _ELIGIBLE, BACKFILL, EPS, SlurmState


class SlurmPasses(SlurmState):
    def _try_preempt(self, j: int, t: float) -> bool:
        tier = self.tier[j]
        if not (self.s.preempt and tier.may_preempt and tier.preemptible):
            return False
        kind, gpus, _limit = self.shape[j]
        shape, classes, run_start = self.shape, self.cls, self.run_start
        by_node: dict[int, list[int]] = {}
        room: dict[int, float] = {}  # per node, the GPUs its victims hold
        for slug in tier.preemptible:
            for v in self.running_tier.get(slug, ()):
                cls = classes[v]
                if (
                    shape[v][0] != kind
                    or cls.kind == FORBIDDEN
                    or (cls.kind == CAUTIOUS and t - run_start[v] < cls.min_runtime)
                ):
                    continue
                i = self.node[v]
                by_node.setdefault(i, []).append(v)
                room[i] = room.get(i, 0.0) + shape[v][1]
        for i in sorted(by_node):
            have = self.free[i].get(kind, 0.0)
            if have + room[i] + EPS < gpus:
                continue
            candidates = sorted(by_node[i], key=lambda v: (self.prio[v], -self.run_start[v], -v))
            chosen = []
            for v in candidates:
                if have + EPS >= gpus:
                    break
                chosen.append(v)
                have += shape[v][1]
            if have + EPS >= gpus and chosen:
                for v in chosen:
                    self._preempt(v, j, t)
                return True
        return False

    def _preempt(self, v: int, by: int, t: float) -> None:
        self.token[v] += 1
        self._stop(v, t, preempted=True)
        ran = t - self.run_start[v]
        cls = self.cls[v]
        lost = ran if cls.checkpoint_interval is None else ran % cls.checkpoint_interval
        self.remaining[v] += lost - ran
        self.lost[v] += lost * self.jobs[v].gpus
        self.preemptions[v] += 1
        self.preempted_by.append((v, by, t, "tier"))
        if self.s.preempt_requeue:
            self.eligible[v] = t + self.s.requeue_delay
            self._push(self.eligible[v], _ELIGIBLE, v)
        else:
            self.end[v] = t

    def _main(self, t: float) -> None:
        self._recalc(t)
        for _neg, _el, j in self._live():
            if not self.is_pending[j]:
                continue
            held = self._held(j)
            if held is not None:
                self._park(j, held, t)
                continue
            node = self._fit(j)
            if node >= 0:
                self._begin(j, node, t)
                continue
            self._try_preempt(j, t)
            self._say(j, RESOURCES, t)
            break  # the partition is blocked: the later jobs wait on Priority

    def _backfill(self, t: float) -> None:
        if not self.free_nodes:
            return
        self._recalc(t)
        s = self.s
        # The windows reserved for higher jobs, per node, in Slurm's ``bf_resolution`` steps: a
        # reservation holds the whole node (Slurm's backfill plans nodes). Only nodes with a
        # free GPU are planned: nothing starts on the others in this pass (so a reservation
        # Slurm would place on a busy node that frees sooner is placed on a free one here: on
        # a cluster of many nodes the model holds free nodes back a little more than Slurm).
        plan = BackfillPlan(self, t, list(self.free_nodes))
        tested = 0
        for _neg, _el, j in self._live():
            if tested >= s.bf_max_job_test or not self.free_nodes:
                break
            if not self.is_pending[j]:
                continue
            held = self._held(j) if self.caps[j] else None
            if held is not None:
                self._park(j, held, t)
                continue
            tested += 1
            shape = self.shape[j]
            limit = shape[2]
            if shape in plan.dead:  # no place in the window for this shape in this pass
                continue
            when, node = plan.earliest(shape)
            if node >= 0 and when <= t:
                self._begin(j, node, t, by=BACKFILL)
                plan.changed(node, shape[0])
                continue
            if plan.may_preempt(self.tier[j], shape) and self._try_preempt(j, t):
                return  # the main scheduler starts it now; the plan changed: next pass
            if node < 0:
                plan.give_up(shape)
            else:
                plan.reserve(node, when, limit)
