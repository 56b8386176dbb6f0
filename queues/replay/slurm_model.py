"""A replay that schedules as Slurm does: ``slurm_replay(jobs, timeline, settings)``.

Picked for a cluster run by Slurm through ``scheduler_model.SchedulerModel("slurm", ...)``,
with the settings of its ``slurm.conf`` (``slurm_conf.SlurmSettings``). It follows Slurm
22.05's multifactor priority (age, Fair Tree fair share, QOS = the tier), the main scheduler
(after each submission and end: priority order, held jobs skipped, the first job that does
not fit blocks the partition), backfill every ``bf_interval`` (time limits, whole-node
reservations within ``bf_window``), nodes with typed GPUs (first fit), time limits, QOS
preemption with requeue. What it models and not, its calibration: docs/replay.md.
"""

from __future__ import annotations

import heapq
import math
from bisect import insort
from collections.abc import Sequence

from .engine import JOB_CAP, PRIORITY, PROJECT_MAX, RESOURCES, TIER_CAP, USER_CAP, Result
from .rules import CAUTIOUS, FORBIDDEN, ClassRule, Job, Rules, TierRule
from .slurm_conf import INFINITE, Node, SlurmSettings, decay, fair_tree, priority

EPS = 1e-9
_RELEASE, _END, _ELIGIBLE, _ARRIVE, _MAIN, _BACKFILL = range(-1, 5)


def gres_type(flavor: str) -> str:
    return flavor.rsplit("/", 1)[-1]


class SlurmReplay:
    def __init__(
        self, jobs: Sequence[Job], timeline: Sequence[tuple[float, Rules]], settings: SlurmSettings
    ) -> None:
        if not timeline:
            raise ValueError("a replay needs rules")
        self.jobs = jobs
        self.rules = rules = timeline[0][1]
        rules.check()
        self.s = settings
        self.tiers = {tier.slug: tier for tier in rules.tiers}
        self.classes = {cls.slug: cls for cls in rules.classes}
        self.type_of = {flavor: gres_type(flavor) for flavor in rules.capacity}
        nodes = list(settings.nodes) or [
            Node(name=flavor, gpus={gres_type(flavor): cap})
            for flavor, cap in rules.capacity.items()
        ]
        self.nodes = nodes
        self.free = [dict(node.gpus) for node in nodes]
        # Nodes with a free GPU, and per node and type the running jobs' planned ends.
        self.free_nodes = set(range(len(nodes)))
        self.type_free: dict[str, float] = {}
        for node in nodes:
            for kind, gpus in node.gpus.items():
                self.type_free[kind] = self.type_free.get(kind, 0.0) + gpus
        self.ends: list[dict[str, list[tuple[float, float, int]]]] = [{} for _ in nodes]
        for job in jobs:
            if job.flavor not in self.type_of:
                raise ValueError(f"job {job.name!r} asks for unknown flavor {job.flavor!r}")
        n = len(jobs)
        self.start = [math.nan] * n
        self.end = [math.nan] * n
        self.preemptions = [0] * n
        self.lost = [0.0] * n
        self.run_start = [0.0] * n
        self.node = [-1] * n
        self.token = [0] * n
        self.reason: list[str | None] = [None] * n
        self.reasons: list[tuple[int, float, str]] = []
        self.runs: list[tuple[int, float, float]] = []
        self.preempted_by: list[tuple[int, int, float, str]] = []
        self.remaining = [job.duration for job in jobs]
        self.limits = {(q.project, q.flavor): q for q in rules.quotas}
        self.tier = [self._tier(job) for job in jobs]
        self.cls = [self._class(job) for job in jobs]
        self.eligible = [job.arrival for job in jobs]
        self.prio = [0.0] * n
        self.pending: list[tuple[float, float, int]] = []  # (-priority, eligible, job), sorted
        self.is_pending = [False] * n
        self.dead = 0
        self.running: set[int] = set()
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.queued: set[tuple[float, int]] = set()
        self.tier_use: dict[str, float] = {}
        self.user_use: dict[tuple[str, str], float] = {}
        self.project_use: dict[tuple[str, str], float] = {}
        self.shares: dict[str, float] = {}
        for quota in rules.quotas:
            self.shares[quota.project] = (
                self.shares.get(quota.project, 0.0) + quota.fair_share_weight
            )
        for job in jobs:
            self.shares.setdefault(job.project, 1.0)
        self.usage = dict.fromkeys(self.shares, 0.0)
        self.fs = dict.fromkeys(self.shares, 1.0)
        self.last_calc = -INFINITE
        self.last_decay = math.nan
        self.used: dict[tuple[str, str], float] = {}
        self.borrowed: dict[tuple[str, str], float] = {}
        self.use_since: dict[tuple[str, str], float] = {}
        self.idle: dict[str, float] = dict.fromkeys(rules.capacity, 0.0)
        self.idle_since = 0.0
        self.now = 0.0

    def _tier(self, job: Job) -> TierRule:
        rules = self.rules
        low = min(rules.tiers, key=lambda tier: tier.score)
        top = self.tiers.get(rules.project_tiers.get(job.project, ""), None)
        top = top or self.tiers.get(rules.default_tier, low)
        tier = self.tiers.get(job.tier, top) if job.tier else top
        if tier.score > top.score:
            tier = top
        raised = rules.job_tiers.get(job.name)
        if raised is not None and self.tiers[raised].score > tier.score:
            tier = self.tiers[raised]
        return tier

    def _class(self, job: Job) -> ClassRule:
        quota = self.limits.get((job.project, job.flavor))
        slug = self.rules.job_classes.get(job.name) or (quota.preemption_class if quota else "")
        slug = slug or self.rules.default_class
        return self.classes.get(slug, ClassRule(slug="", kind="allowed"))

    def _held(self, j: int) -> str | None:
        """The limit that holds ``j`` now (a Slurm reason token), or None."""
        job, tier = self.jobs[j], self.tier[j]
        if tier.max_gpus_per_job is not None and job.gpus > tier.max_gpus_per_job + EPS:
            return JOB_CAP
        total = tier.max_gpus_total
        if total is not None and self.tier_use.get(tier.slug, 0.0) + job.gpus > total + EPS:
            return TIER_CAP
        if tier.max_gpus_per_user is not None:
            used = self.user_use.get((tier.slug, job.user), 0.0)
            if used + job.gpus > tier.max_gpus_per_user + EPS:
                return USER_CAP
        quota = self.limits.get((job.project, job.flavor))
        if (
            quota is not None
            and quota.maximum is not None
            and (
                self.project_use.get((job.project, job.flavor), 0.0) + job.gpus
                > quota.maximum + EPS
            )
        ):
            return PROJECT_MAX
        return None

    def _say(self, j: int, token: str, t: float) -> None:
        if self.reason[j] != token:
            self.reason[j] = token
            self.reasons.append((j, t, token))

    def _push(self, t: float, kind: int, j: int = -1, token: int = 0) -> None:
        if kind in (_MAIN, _BACKFILL):
            if (t, kind) in self.queued:
                return
            self.queued.add((t, kind))
        self.seq += 1
        heapq.heappush(self.heap, (t, kind, self.seq, j, token))

    def _trigger(self, t: float) -> None:
        self._push(t + self.s.event_delay, _MAIN)
        if self.s.backfill:
            step = self.s.bf_interval or 1.0
            self._push(math.ceil((t + EPS) / step) * step, _BACKFILL)

    def _account(self, t: float) -> None:
        """Integrate use and idle GPUs up to ``t``."""
        for key, since in self.use_since.items():
            used = self.project_use.get(key, 0.0)
            if used > 0 and t > since:
                self.used[key] = self.used.get(key, 0.0) + (t - since) * used
                quota = self.limits.get(key)
                over = used - (quota.guarantee if quota else 0.0)
                if over > 0:
                    self.borrowed[key] = self.borrowed.get(key, 0.0) + (t - since) * over
            self.use_since[key] = t
        if t > self.idle_since:
            for flavor, kind in self.type_of.items():
                free = self.type_free.get(kind, 0.0)
                self.idle[flavor] += (t - self.idle_since) * free
            self.idle_since = t

    def _use(self, j: int, delta: float, t: float) -> None:
        job, tier = self.jobs[j], self.tier[j]
        self._account(t)
        key = (job.project, job.flavor)
        self.use_since.setdefault(key, t)
        self.project_use[key] = self.project_use.get(key, 0.0) + delta
        self.tier_use[tier.slug] = self.tier_use.get(tier.slug, 0.0) + delta
        user = (tier.slug, job.user)
        self.user_use[user] = self.user_use.get(user, 0.0) + delta
        node = self.node[j]
        free = self.free[node]
        free[self.type_of[job.flavor]] -= delta
        self.type_free[self.type_of[job.flavor]] -= delta
        if any(v > EPS for v in free.values()):
            self.free_nodes.add(node)
        else:
            self.free_nodes.discard(node)

    def _recalc(self, t: float) -> None:
        """Every ``PriorityCalcPeriod``: decay usage, rank fair share, recompute priorities."""
        s = self.s
        if t < self.last_calc + s.calc_period:
            return
        if not math.isnan(self.last_decay):
            elapsed = t - self.last_decay
            for project in self.usage:
                self.usage[project] = decay(self.usage[project], elapsed, s.decay_half_life)
            for j in self.running:
                project = self.jobs[j].project
                self.usage[project] += t - max(self.run_start[j], self.last_decay)
        self.last_decay = t
        self.last_calc = (
            t
            if math.isinf(self.last_calc)
            else self.last_calc + s.calc_period * ((t - self.last_calc) // s.calc_period)
        )
        self.fs = fair_tree(self.shares, self.usage)
        for _neg, _el, j in self.pending:
            if self.is_pending[j]:
                self.prio[j] = self._priority(j, t)
        self._sort()

    def _priority(self, j: int, t: float) -> float:
        tier = self.tier[j]
        return priority(
            self.s,
            waited=t - self.eligible[j],
            fairshare=self.fs.get(self.jobs[j].project, 0.0),
            qos=self.s.qos_factor(tier.slug, tier.score),
        )

    def _sort(self) -> None:
        self.pending = sorted(
            (-self.prio[j], self.eligible[j], j) for _n, _e, j in self.pending if self.is_pending[j]
        )
        self.dead = 0

    def _enqueue(self, j: int, t: float) -> None:
        self.is_pending[j] = True
        self.prio[j] = self._priority(j, t)
        insort(self.pending, (-self.prio[j], self.eligible[j], j))
        self._say(j, PRIORITY, t)

    def _fit(self, j: int, free: list[dict[str, float]] | None = None) -> int:
        job = self.jobs[j]
        kind = self.type_of[job.flavor]
        for i, node in enumerate(free or self.free):
            if node.get(kind, 0.0) + EPS >= job.gpus:
                return i
        return -1

    def _begin(self, j: int, node: int, t: float) -> None:
        self.is_pending[j] = False
        self.dead += 1
        self.node[j] = node
        self.running.add(j)
        self.run_start[j] = t
        if math.isnan(self.start[j]):
            self.start[j] = t
        self.reason[j] = None
        self._use(j, self.jobs[j].gpus, t)
        limit = self.s.time_limit(self.jobs[j].time_limit)
        kind = self.type_of[self.jobs[j].flavor]
        insort(self.ends[node].setdefault(kind, []), (t + limit, self.jobs[j].gpus, j))
        self.seq += 1
        self.token[j] += 1
        heapq.heappush(
            self.heap, (t + min(self.remaining[j], limit), _END, self.seq, j, self.token[j])
        )

    def _stop(self, j: int, t: float) -> None:
        self._use(j, -self.jobs[j].gpus, t)
        planned = self.ends[self.node[j]][self.type_of[self.jobs[j].flavor]]
        planned.remove((self.limit_end(j), self.jobs[j].gpus, j))
        self.running.discard(j)
        self.runs.append((j, self.run_start[j], t))
        self._trigger(t)

    def limit_end(self, j: int) -> float:  # when the plan expects a running job to end
        return self.run_start[j] + self.s.time_limit(self.jobs[j].time_limit)

    def _try_preempt(self, j: int, t: float) -> bool:
        tier = self.tier[j]
        if not (self.s.preempt and tier.may_preempt and tier.preemptible):
            return False
        job = self.jobs[j]
        kind = self.type_of[job.flavor]
        by_node: dict[int, list[int]] = {}
        for v in self.running:
            cls = self.cls[v]
            if (
                self.tier[v].slug in tier.preemptible
                and self.type_of[self.jobs[v].flavor] == kind
                and cls.kind != FORBIDDEN
                and not (cls.kind == CAUTIOUS and t - self.run_start[v] < cls.min_runtime)
            ):
                by_node.setdefault(self.node[v], []).append(v)
        for i in sorted(by_node):
            have = self.free[i].get(kind, 0.0)
            candidates = sorted(by_node[i], key=lambda v: (self.prio[v], -self.run_start[v], -v))
            chosen = []
            for v in candidates:
                if have + EPS >= job.gpus:
                    break
                chosen.append(v)
                have += self.jobs[v].gpus
            if have + EPS >= job.gpus and chosen:
                for v in chosen:
                    self._preempt(v, j, t)
                return True
        return False

    def _preempt(self, v: int, by: int, t: float) -> None:
        self.token[v] += 1
        self._stop(v, t)
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

    def _live(self) -> list[tuple[float, float, int]]:
        """The pending jobs in priority order (started ones dropped)."""
        if self.dead * 2 > len(self.pending):
            self.pending = [entry for entry in self.pending if self.is_pending[entry[2]]]
            self.dead = 0
        return self.pending

    def _main(self, t: float) -> None:
        self._recalc(t)
        for _neg, _el, j in self._live():
            if not self.is_pending[j]:
                continue
            held = self._held(j)
            if held is not None:
                self._say(j, held, t)
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
        horizon = t + s.bf_window
        # The windows reserved for higher jobs, per node: a reservation holds the whole node
        # (Slurm's backfill plans nodes). Only nodes with a free GPU are planned: nothing
        # starts on the others in this pass (so a reservation Slurm would place on a busy node
        # that frees sooner is placed on a free one here: on a cluster of many nodes the model
        # holds free nodes back a little more than Slurm).
        reserved: dict[int, list[tuple[float, float]]] = {}
        order = sorted(self.free_nodes)  # a node filled in this pass stays; its free GPUs say
        tested = 0
        for _neg, _el, j in self._live():
            if tested >= s.bf_max_job_test or not self.free_nodes:
                break
            if not self.is_pending[j] or self._held(j) is not None:
                continue
            tested += 1
            job = self.jobs[j]
            kind = self.type_of[job.flavor]
            limit = s.time_limit(job.time_limit)
            finish = t + limit + s.bf_lag
            node = next(
                (
                    i
                    for i in order
                    if self.free[i].get(kind, 0.0) + EPS >= job.gpus
                    and not any(a < finish - EPS for a, _b in reserved.get(i, ()))
                ),
                -1,
            )
            if node >= 0:
                self._begin(j, node, t)
                continue
            when, node = self._earliest(j, t, reserved, horizon, order)
            if node >= 0:
                reserved.setdefault(node, []).append((when, when + limit))

    def _earliest(
        self,
        j: int,
        t: float,
        reserved: dict[int, list[tuple[float, float]]],
        horizon: float,
        order: list[int],
    ) -> tuple[float, int]:
        """The earliest time within the window ``j`` fits for its whole time limit on a node
        with a free GPU that no higher job has reserved for that time; (inf, -1) if none."""
        job = self.jobs[j]
        kind = self.type_of[job.flavor]
        limit = self.s.time_limit(job.time_limit) + self.s.bf_lag
        best, where = INFINITE, -1
        for i in order:
            cap = self.nodes[i].gpus.get(kind, 0.0)
            if cap + EPS < job.gpus:
                continue
            need = job.gpus - self.free[i].get(kind, 0.0)
            first = t
            for end, g, _k in self.ends[i].get(kind, ()):
                if end >= best or end > horizon:
                    break
                need -= g
                if need <= EPS:
                    first = max(t, end)
                    break
            if need > EPS:
                continue
            mine = reserved.get(i, ())
            for start in [first, *sorted(b for _a, b in mine if b > first)]:
                if start > horizon or start >= best:
                    break
                if any(a < start + limit - EPS and start < b - EPS for a, b in mine):
                    continue
                best, where = start, i
                break
        return best, where

    def run(self, until: float | None = None) -> Result:
        jobs = self.jobs
        order = sorted(range(len(jobs)), key=lambda j: (jobs[j].arrival, j))
        begin = min([jobs[order[0]].arrival] if order else [0.0])
        self.idle_since = begin
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
