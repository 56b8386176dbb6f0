"""The Slurm model's state: jobs, nodes, the queue, use and limits, the event heap."""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Sequence

from ..engine import JOB_CAP, PRIORITY, PROJECT_MAX, TIER_CAP, USER_CAP
from ..rules import ClassRule, Job, Rules, TierRule
from ..slurm_conf import INFINITE, Node, SlurmSettings, decay, fair_tree, priority

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


class SlurmState:
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
        for job in jobs:
            if job.flavor not in self.type_of:
                raise ValueError(f"job {job.name!r} asks for unknown flavor {job.flavor!r}")
        self._init_nodes()
        self._init_jobs()
        self._init_use()

    def _init_nodes(self) -> None:
        """The nodes, their free GPUs and the running jobs' planned ends."""
        nodes = list(self.s.nodes) or [
            Node(name=flavor, gpus={gres_type(flavor): cap})
            for flavor, cap in self.rules.capacity.items()
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

    def _init_jobs(self) -> None:
        """Per job: its outcome so far, tier, class, priority inputs and queue state."""
        jobs = self.jobs
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
        self.limits = {(q.project, q.flavor): q for q in self.rules.quotas}
        self.tier = [self._tier(job) for job in jobs]
        self.cls = [self._class(job) for job in jobs]
        self.eligible = [job.arrival for job in jobs]
        self.prio = [0.0] * n
        self.qos = [self.s.qos_factor(tier.slug, tier.score) for tier in self.tier]
        self.shape = [
            (self.type_of[job.flavor], job.gpus, self.s.time_limit(job.time_limit)) for job in jobs
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

    def _init_use(self) -> None:
        """Use per tier, user and project, fair-share usage, accounting."""
        jobs = self.jobs
        self.tier_use: dict[str, float] = {}
        self.user_use: dict[tuple[str, str], float] = {}
        self.project_use: dict[tuple[str, str], float] = {}
        self.shares: dict[str, float] = {}
        for quota in self.rules.quotas:
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
        self.idle: dict[str, float] = dict.fromkeys(self.rules.capacity, 0.0)
        self.idle_since: dict[str, float] = {}
        self.begin = 0.0
        self.parked: dict[tuple[str, ...], list[tuple[float, int]]] = {}
        self.is_parked = [False] * len(jobs)
        self.listed: list[tuple[float, float, int] | None] = [None] * len(jobs)
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
            use = (
                self.tier_use
                if token == TIER_CAP
                else (self.user_use if token == USER_CAP else self.project_use)
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
        user, project = (tier.slug, job.user), (job.project, job.flavor)
        for key, cap, used in (
            (("tier", tier.slug), tier.max_gpus_total, self.tier_use.get(tier.slug, 0.0)),
            (("user", *user), tier.max_gpus_per_user, self.user_use.get(user, 0.0)),
            (
                ("project", *project),
                None if quota is None else quota.maximum,
                self.project_use.get(project, 0.0),
            ),
        ):
            parked = self.parked.get(key)
            if not parked or cap is None:
                continue
            room = cap - used + EPS
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

    def _trigger(self, t: float, *, now: bool = False) -> None:
        """Passes after a change at ``t``: the main scheduler now if ``now``, else at its next
        periodic pass; backfill at its next pass."""
        s = self.s
        self._push(t if now else _next_pass(t, s.sched_interval, s.sched_phase), _MAIN)
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

    def _stop(self, j: int, t: float, *, preempted: bool = False) -> None:
        """``j``'s GPUs are free at ``t`` (its end's completing is over, or it was preempted).
        The main scheduler runs at once for a preemption and, with ``main_at_end``, for an end
        (Slurm's epilog-complete message); else the next periodic pass or backfill uses them."""
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
        self._trigger(t, now=preempted or self.s.main_at_end)

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

    def _live(self) -> list[tuple[float, float, int]]:
        """The pending jobs in priority order (started ones dropped)."""
        if self.dead * 2 > len(self.pending):
            self.pending = [entry for entry in self.pending if self.is_pending[entry[2]]]
            self.dead = 0
        return self.pending
