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
from bisect import bisect_left, bisect_right, insort
from collections.abc import Sequence

from .engine import JOB_CAP, PRIORITY, PROJECT_MAX, RESOURCES, TIER_CAP, USER_CAP, Result
from .rules import CAUTIOUS, FORBIDDEN, ClassRule, Job, Rules, TierRule
from .slurm_conf import INFINITE, Node, SlurmSettings, decay, fair_tree, priority

EPS = 1e-9
MAIN, BACKFILL = "main", "backfill"
_RELEASE, _END, _ELIGIBLE, _ARRIVE, _MAIN, _BACKFILL = range(-1, 5)


def gres_type(flavor: str) -> str:
    return flavor.rsplit("/", 1)[-1]


def _next_pass(t: float, every: float, phase: float) -> float:
    """The first pass at or after ``t`` of one that runs every ``every`` seconds at ``phase``."""
    if every <= 0:
        return t
    return math.ceil((t - phase) / every - EPS) * every + phase


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
        self.node_version = [0] * len(nodes)
        self.free_cache: dict[tuple[int, str, float], tuple[int, float | None]] = {}
        # Nodes with a free GPU, and per node and type the running jobs' planned ends.
        self.free_nodes = list(range(len(nodes)))  # sorted
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
        self.started_by = [""] * n  # which pass started a job (last start): main or backfill
        self.reasons: list[tuple[int, float, str]] = []
        self.runs: list[tuple[int, float, float]] = []
        self.preempted_by: list[tuple[int, int, float, str]] = []
        self.remaining = [job.duration for job in jobs]
        self.limits = {(q.project, q.flavor): q for q in rules.quotas}
        self.tier = [self._tier(job) for job in jobs]
        self.cls = [self._class(job) for job in jobs]
        self.eligible = [job.arrival for job in jobs]
        self.prio = [0.0] * n
        self.qos = [settings.qos_factor(tier.slug, tier.score) for tier in self.tier]
        self.shape = [
            (self.type_of[job.flavor], job.gpus, settings.time_limit(job.time_limit))
            for job in jobs
        ]
        self.caps = [self._caps(j) for j in range(n)]
        self.pending: list[tuple[float, float, int]] = []  # (-priority, eligible, job), sorted
        self.is_pending = [False] * n
        self.dead = 0
        self.running: set[int] = set()
        self.running_tier: dict[str, set[int]] = {}
        # Per project: running jobs, and the sum of when each began to count towards usage
        # (its start, or the last decay if it ran then); a job's start counts in ``run_epoch``.
        self.run_count: dict[str, int] = {}
        self.run_since: dict[str, float] = {}
        self.run_epoch = [0] * n
        self.calc_epoch = 0
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
        self.idle_since: dict[str, float] = {}
        self.begin = 0.0
        self.parked: dict[tuple[str, ...], list[tuple[float, int]]] = {}
        self.is_parked = [False] * n
        self.listed: list[tuple[float, float, int] | None] = [None] * n
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

    def _caps(self, j: int) -> tuple[tuple[str, object, float], ...]:
        """The limits that may hold ``j``, in Slurm's order: (reason, use key, room)."""
        job, tier = self.jobs[j], self.tier[j]
        caps: list[tuple[str, object, float]] = []
        if tier.max_gpus_per_job is not None and job.gpus > tier.max_gpus_per_job + EPS:
            caps.append((JOB_CAP, None, -1.0))
        if tier.max_gpus_total is not None:
            caps.append((TIER_CAP, tier.slug, tier.max_gpus_total - job.gpus + EPS))
        if tier.max_gpus_per_user is not None:
            caps.append((USER_CAP, (tier.slug, job.user), tier.max_gpus_per_user - job.gpus + EPS))
        quota = self.limits.get((job.project, job.flavor))
        if quota is not None and quota.maximum is not None:
            key = (job.project, job.flavor)
            caps.append((PROJECT_MAX, key, quota.maximum - job.gpus + EPS))
        return tuple(caps)

    def _held(self, j: int) -> str | None:
        """The limit that holds ``j`` now (a Slurm reason token), or None."""
        for token, key, room in self.caps[j]:
            if token == JOB_CAP:
                return token
            use = self.tier_use if token == TIER_CAP else (
                self.user_use if token == USER_CAP else self.project_use
            )
            if use.get(key, 0.0) > room:  # type: ignore[call-overload]
                return token
        return None

    def _park(self, j: int, held: str, t: float) -> None:
        """Take a held job out of the queue until the use that holds it drops (Slurm skips
        held jobs in every pass; use only grows while it stays held)."""
        self._say(j, held, t)
        job, slug = self.jobs[j], self.tier[j].slug
        key: tuple[str, ...] = {
            TIER_CAP: ("tier", slug),
            USER_CAP: ("user", slug, job.user),
            PROJECT_MAX: ("project", job.project, job.flavor),
        }.get(held, ("job",))
        insort(self.parked.setdefault(key, []), (job.gpus, j))
        self.is_pending[j] = False
        self.is_parked[j] = True
        self.dead += 1

    def _unpark(self, j: int) -> None:
        """``j`` stopped: the jobs its tier's, user's or project's use held that fit in the
        room now left queue again (their priorities as last computed)."""
        job, tier = self.jobs[j], self.tier[j]
        quota = self.limits.get((job.project, job.flavor))
        for key, cap, used in (
            (("tier", tier.slug), tier.max_gpus_total, self.tier_use),
            (("user", tier.slug, job.user), tier.max_gpus_per_user, self.user_use),
            (("project", job.project, job.flavor), quota and quota.maximum, self.project_use),
        ):
            parked = self.parked.get(key)
            if not parked or cap is None:
                continue
            room = cap - used.get(key[1] if key[0] == "tier" else key[1:], 0.0) + EPS
            cut = bisect_right(parked, (room, len(self.jobs)))
            for _gpus, v in parked[:cut]:
                self.is_parked[v] = False
                self._list(v)
            del parked[:cut]

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

    def _trigger(self, t: float, *, ended: bool = False) -> None:
        """Passes after a change at ``t``: the main scheduler now when an ended job's GPUs came
        back (Slurm runs it on the epilog complete), else at its next periodic pass; backfill
        at its next pass."""
        s = self.s
        self._push(t if ended else _next_pass(t, s.sched_interval, s.sched_phase), _MAIN)
        if s.backfill:
            self._push(_next_pass(t, s.bf_interval, s.bf_phase), _BACKFILL)

    def _account(self, t: float, key: tuple[str, str] | None = None, kind: str = "") -> None:
        """Integrate use and idle GPUs up to ``t``: of one project and flavor and one GPU type
        (the ones about to change), or of all."""
        keys = list(self.use_since) if key is None else [key]
        for k in keys:
            since = self.use_since.setdefault(k, t)
            used = self.project_use.get(k, 0.0)
            if used > 0 and t > since:
                self.used[k] = self.used.get(k, 0.0) + (t - since) * used
                quota = self.limits.get(k)
                over = used - (quota.guarantee if quota else 0.0)
                if over > 0:
                    self.borrowed[k] = self.borrowed.get(k, 0.0) + (t - since) * over
            self.use_since[k] = t
        for flavor, of_kind in self.type_of.items():
            if kind and of_kind != kind:
                continue
            since = self.idle_since.get(flavor, self.begin)
            if t > since:
                self.idle[flavor] += (t - since) * self.type_free.get(of_kind, 0.0)
                self.idle_since[flavor] = t

    def _use(self, j: int, delta: float, t: float) -> None:
        job, tier = self.jobs[j], self.tier[j]
        key = (job.project, job.flavor)
        kind = self.type_of[job.flavor]
        self._account(t, key, kind)
        self.project_use[key] = self.project_use.get(key, 0.0) + delta
        self.tier_use[tier.slug] = self.tier_use.get(tier.slug, 0.0) + delta
        user = (tier.slug, job.user)
        self.user_use[user] = self.user_use.get(user, 0.0) + delta
        if delta < 0 and self.parked:
            self._unpark(j)
        node = self.node[j]
        self.node_version[node] += 1
        free = self.free[node]
        free[kind] -= delta
        self.type_free[kind] -= delta
        has = any(v > EPS for v in free.values())
        at = bisect_left(self.free_nodes, node)
        listed = at < len(self.free_nodes) and self.free_nodes[at] == node
        if has and not listed:
            self.free_nodes.insert(at, node)
        elif listed and not has:
            del self.free_nodes[at]

    def _recalc(self, t: float) -> None:
        """Every ``PriorityCalcPeriod``: decay usage, rank fair share, recompute priorities."""
        s = self.s
        if t < self.last_calc + s.calc_period:
            return
        if not math.isnan(self.last_decay):
            elapsed = t - self.last_decay
            for project in self.usage:
                self.usage[project] = decay(self.usage[project], elapsed, s.decay_half_life)
            # The running jobs' time since the last decay (or their start), per project.
            for project, count in self.run_count.items():
                if count:
                    self.usage[project] += count * t - self.run_since[project]
        for project, count in self.run_count.items():
            self.run_since[project] = count * t
        self.calc_epoch += 1
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
        for parked in self.parked.values():
            for _gpus, j in parked:
                self.prio[j] = self._priority(j, t)
        self._sort()

    def _priority(self, j: int, t: float) -> float:
        tier = self.tier[j]
        return priority(
            self.s,
            waited=t - self.eligible[j],
            fairshare=self.fs.get(self.jobs[j].project, 0.0),
            qos=self.qos[j],
        )

    def _sort(self) -> None:
        self.pending = sorted(
            (-self.prio[j], self.eligible[j], j) for _n, _e, j in self.pending if self.is_pending[j]
        )
        for entry in self.pending:
            self.listed[entry[2]] = entry
        self.dead = 0

    def _list(self, j: int) -> None:
        """Queue ``j`` in priority order; an entry of it still listed (dead: the job started,
        was held, or queues again with another priority or eligible time) is dropped or
        revived, so a job is listed once."""
        old = self.listed[j]
        if old is not None:
            at = bisect_left(self.pending, old)
            if at < len(self.pending) and self.pending[at] == old:
                del self.pending[at]
                self.dead -= 1
        entry = (-self.prio[j], self.eligible[j], j)
        insort(self.pending, entry)
        self.listed[j] = entry
        self.is_pending[j] = True

    def _enqueue(self, j: int, t: float) -> None:
        self.prio[j] = self._priority(j, t)
        self._list(j)
        self._say(j, PRIORITY, t)

    def _fit(self, j: int) -> int:
        """The first node (by index) with room for ``j`` now, or -1."""
        job = self.jobs[j]
        kind = self.type_of[job.flavor]
        free = self.free
        for i in self.free_nodes:
            if free[i].get(kind, 0.0) + EPS >= job.gpus:
                return i
        return -1

    def _begin(self, j: int, node: int, t: float, by: str = MAIN) -> None:
        self.is_pending[j] = False
        self.started_by[j] = by
        self.dead += 1
        self.node[j] = node
        self.running.add(j)
        project = self.jobs[j].project
        self.run_count[project] = self.run_count.get(project, 0) + 1
        self.run_since[project] = self.run_since.get(project, 0.0) + t
        self.run_epoch[j] = self.calc_epoch
        self.running_tier.setdefault(self.tier[j].slug, set()).add(j)
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
        project = self.jobs[j].project
        self.run_count[project] -= 1
        since = self.run_start[j] if self.run_epoch[j] == self.calc_epoch else self.last_decay
        self.run_since[project] -= since
        self.running_tier[self.tier[j].slug].discard(j)
        self.runs.append((j, self.run_start[j], t))
        self._trigger(t, ended=True)

    def free_at(self, i: int, kind: str, gpus: float) -> float | None:
        """When ``gpus`` GPUs of ``kind`` are free on node ``i`` by its running jobs' limits
        (-inf: now; None: never), kept until the node changes."""
        key = (i, kind, gpus)
        cached = self.free_cache.get(key)
        if cached is not None and cached[0] == self.node_version[i]:
            return cached[1]
        when: float | None = None
        if self.nodes[i].gpus.get(kind, 0.0) + EPS >= gpus:
            need = gpus - self.free[i].get(kind, 0.0)
            if need <= EPS:
                when = -INFINITE
            else:
                for end, g, _k in self.ends[i].get(kind, ()):
                    need -= g
                    if need <= EPS:
                        when = end
                        break
        self.free_cache[key] = (self.node_version[i], when)
        return when

    def limit_end(self, j: int) -> float:  # when the plan expects a running job to end
        return self.run_start[j] + self.s.time_limit(self.jobs[j].time_limit)

    def _try_preempt(self, j: int, t: float) -> bool:
        tier = self.tier[j]
        if not (self.s.preempt and tier.may_preempt and tier.preemptible):
            return False
        job = self.jobs[j]
        kind = self.type_of[job.flavor]
        by_node: dict[int, list[int]] = {}
        for v in (v for slug in tier.preemptible for v in self.running_tier.get(slug, ())):
            cls = self.cls[v]
            if (
                self.type_of[self.jobs[v].flavor] == kind
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
        plan = _Plan(self, t, list(self.free_nodes))
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
            if plan.hopeless(shape):
                continue
            when, node = plan.earliest(shape)
            if 0 <= node and when <= t:
                self._begin(j, node, t, by=BACKFILL)
                plan.changed(node, shape[0])
                continue
            if plan.may_preempt(self.tier[j], shape) and self._try_preempt(j, t):
                return  # the main scheduler starts it now; the plan changed: next pass
            if node < 0:
                plan.give_up(shape)
            else:
                plan.reserve(node, when, limit)

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


class _Plan:
    """One backfill pass's plan (Slurm's ``node_space``): per node, the windows reserved for
    higher jobs, floored to ``bf_resolution`` as Slurm stores them; per job shape (GPU type,
    GPUs, time limit) the nodes in the order their GPUs free up. Within a pass nothing frees:
    a shape that found no place within the window finds none later in the pass either."""

    def __init__(self, replay: SlurmReplay, t: float, order: list[int]) -> None:
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

    def hopeless(self, shape: tuple[str, float, float]) -> bool:
        return shape in self.dead

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
