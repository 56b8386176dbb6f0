"""Kueue 0.17's fair-sharing preemption in the Kueue replay model (no Django).

With fair sharing on (Arbiter's Kueue configuration: ``preemptionStrategies:
[LessThanOrEqualToFinalShare, LessThanInitialShare]``) Kueue finds every preemption target
with ``fairPreemptions`` (``pkg/scheduler/preemption/preemption.go``, ``fairsharing/``,
``common/ordering.go``; shares from ``pkg/cache/scheduler/fair_sharing.go``): candidates are
its own ClusterQueue's lower priorities (``withinClusterQueue: LowerPriority``) and, with
``reclaimWithinCohort: Any``, every workload of another ClusterQueue borrowing on the flavor,
whatever its priority; the preemptor's workload counted in its queue's share; the queue with
the highest dominant resource share first (GPUs above nominal over the cohort's flavors ×
1000 / the GPUs lendable in the cohort / the weight); a candidate taken when the preemptor's
share is ≤ the target's after the removal, or unconditionally while the preemptor stays
within its nominal quota (``FairSharingPreemptWithinNominal``, on in 0.17); refused ones
retried, one per queue, when the preemptor's share is < the target's; until it fits, then
targets not needed put back (``fillBackWorkloads``). docs/replay.md says it in full, and
what is not modelled.

``KueueSettings`` switches it: fair sharing on, both strategies, and each ClusterQueue's
``reclaimWithinCohort`` and ``withinClusterQueue`` as Arbiter's export writes them, unless a
run (the lab's scenario) names its own.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence

from .engine import EPS, LENDING, RESOURCES
from .engine.vocabulary import _Flavor
from .kueue_cohort import LESS_INITIAL, LESS_OR_EQUAL_FINAL, KueueSettings, _Cohort
from .kueue_look import _NOT_BORROWING, _Attempt, _Share
from .rules import FORBIDDEN, Job, Rules

# A queue's candidates, their GPUs, and whether one was left out (admitted in the instant).
_Found = tuple[tuple[int, ...], float, bool]


def _less_or_equal_final(preemptor: _Share, _old: _Share, new: _Share) -> bool:
    return preemptor <= new


def _less_initial(preemptor: _Share, old: _Share, _new: _Share) -> bool:
    return preemptor < old


STRATEGIES: dict[str, Callable[[_Share, _Share, _Share], bool]] = {
    LESS_OR_EQUAL_FINAL: _less_or_equal_final,
    LESS_INITIAL: _less_initial,
}


def _none_reach(top: list[tuple[_Share, str]], project: str, floor: _Share) -> bool:
    """Whether no queue but ``project`` among the two highest shares reaches ``floor``."""
    return not any(other != project and not share < floor for share, other in top)


class _FairSharing(_Cohort):
    """``KueueReplay``'s preemption when Kueue's fair sharing is on (``_try_fair``)."""

    def __init__(
        self,
        jobs: Sequence[Job],
        timeline: Sequence[tuple[float, Rules]],
        settings: KueueSettings | None = None,
    ) -> None:
        super().__init__(jobs, timeline, settings)
        for strategy in self.kueue.strategies:
            if strategy not in STRATEGIES:
                raise ValueError(f"unknown fair-sharing preemption strategy {strategy!r}")
        # A look that found no targets is not repeated before the pool's usage changes
        # (``fair_version``; nor before a protected candidate may be taken).
        self.fair_failed: dict[tuple[str, str, float, float], tuple[int, float]] = {}
        # Per look that found no queue's share at its floor: the floor, how many times its
        # queue's usage of the pool had changed (``fair_used``), until when (``_fair_below``).
        self.fair_below: dict[tuple[str, str, float, float], tuple[_Share, int, float]] = {}
        self.fair_evicted: dict[int, float] = {}  # a victim: when it was preempted
        # A preemptor: when it preempted (nobody's target before Kueue admits it); the last.
        self.fair_admitted: dict[int, float] = {}
        self.fair_admitted_last = -math.inf
        self.fair_shares: dict[
            str, tuple[int, list[tuple[str, _Share]], list[tuple[_Share, str]]]
        ] = {}
        # Per queue its candidates (per priority: its own queue's), while the pool's usage
        # and the time stay as they were (``_fair_now``).
        self.fair_now_at: tuple[int, float] = (-1, math.nan)
        self.fair_now: dict[tuple[str, str, float | None], _Found] = {}
        self.fair_own_retry: dict[tuple[str, str, float | None], float] = {}

    def _fair_forget(self) -> None:
        super()._fair_forget()
        self.fair_failed, self.fair_below, self.fair_shares = {}, {}, {}
        self.fair_now_at, self.fair_now, self.fair_own_retry = (-1, math.nan), {}, {}

    # -- the look for targets -----------------------------------------------------------------

    def _fair_by_priority(self, project: str, flavor: _Flavor) -> bool:
        """Whether a look for targets of the project's work on ``flavor`` depends on the
        job's priority (fair sharing on and its queue preempts its own lower priorities)."""
        if not self.fair:
            return False
        for key, other in self.flavors.items():
            if other is flavor:
                return self._fair_within(project, key.partition("/")[0])
        return False

    def _fair_memo(self, j: int, name: str, t: float) -> tuple[str, str, float, float]:
        job = self.jobs[j]
        within = self._fair_within(job.project, name.partition("/")[0])
        return (name, job.project, job.gpus, self._priority(j, t) if within else 0.0)

    def _fair_held(self, j: int, name: str, t: float) -> bool:
        """Whether a look for targets for ``j`` would find none: one found none, nothing
        having changed since; or one found no queue whose share reached the preemptor's
        (``_fair_candidates``' floor) and it holds still (``_fair_below``)."""
        memo = self._fair_memo(j, name, t)
        pool = name.partition("/")[0]
        failed = self.fair_failed.get(memo)
        if failed is not None and failed[0] == self.fair_version.get(pool, 0) and t < failed[1]:
            return True
        return self._fair_below(j, memo, pool, name, t)

    def _fair_below(
        self, j: int, memo: tuple[str, str, float, float], pool: str, name: str, t: float
    ) -> bool:
        """A look that found no candidate because every other queue borrowing on the flavor
        had a share below the preemptor's (the floor) finds none again while the
        preemptor's queue used the same GPUs of the pool (its floor and its own candidates
        are those), its own protected candidates stay protected (``retry``), and no other
        queue's share has reached the floor since (shares of the queues that used fewer
        only fell)."""
        below = self.fair_below.get(memo)
        if below is None:
            return False
        floor, used, retry = below
        project = memo[1]
        if not (t < retry and used == self.fair_used.get((pool, project), 0)):
            return False
        _borrowers, top = self._fair_borrowers(j, self.flavors[name], name)
        return _none_reach(top, project, floor)

    def _fair_dead(self, j: int, flavor: _Flavor, t: float, lending: str | None) -> bool:
        """``_Settle._dead`` with fair sharing: trying ``j`` would only set it aside again."""
        if lending is None and flavor.free + EPS >= self.jobs[j].gpus:
            return False
        if self.reason[j] != (LENDING if lending == LENDING else RESOURCES):
            return False
        name = self.jobs[j].flavor
        # The look ``_try_fair`` would take, taken now: it reads the state only, which stays
        # as it is until a job starts or is preempted (then the pass tells again).
        return self._fair_held(j, name, t) or self._fair_look(j, flavor, name, t) is None

    def _try_fair(self, j: int, flavor: _Flavor, name: str, t: float) -> bool:
        """Preempt the targets fair sharing finds for ``j`` (then it starts); False: none."""
        if self._fair_held(j, name, t) or self.fair_evicted.get(j) == t:
            # Evicted this instant: on Kueue its eviction (the Job suspended, the quota given
            # back) ends before it is a head again, a cycle later at least.
            return False
        targets = self._fair_look(j, flavor, name, t)
        if targets is None:
            return False
        project = self.jobs[j].project
        self.fair_admitted[j] = self.fair_admitted_last = t
        for v in targets:
            self.fair_evicted[v] = t
            self._preempt(v, j, t, "tier" if self.jobs[v].project == project else "reclaim")
        return True

    def _fair_look(self, j: int, flavor: _Flavor, name: str, t: float) -> list[int] | None:
        """``_fair_targets``, a failure kept until the pool's usage changes (``_fair_held``)."""
        memo = self._fair_memo(j, name, t)
        targets, retry = self._fair_targets(j, flavor, name, t)
        if targets is None:
            self.fair_failed[memo] = (self.fair_version.get(name.partition("/")[0], 0), retry)
        else:
            self.fair_failed.pop(memo, None)
        return targets

    def _fair_candidates(
        self, j: int, flavor: _Flavor, name: str, attempt: _Attempt, t: float
    ) -> tuple[dict[str, tuple[tuple[int, ...], float]], float]:
        """``findCandidates`` per ClusterQueue with their GPUs (``_fair_targets`` sorts them); and
        until when the protected ones of its own queue stay protected. Without candidates of
        its own queue and above its nominal quota, the preemptor's share is fixed during the
        look and a queue's only falls: a queue whose share is already below it never gives a
        target (both strategies ask at least its share), so it is left out."""
        job = self.jobs[j]
        pool = attempt.pool
        within = self._fair_within(job.project, pool)
        reclaim = self._fair_reclaims(job.project, pool)
        quota = flavor.quotas.get(job.project)
        guarantee = quota.guarantee if quota is not None else 0.0
        # ``fitsResourceQuota``: a request above the nominal quota looks for targets only
        # when its queue may preempt while borrowing (fair sharing, reclaim not Never).
        if not reclaim and job.gpus > guarantee + EPS:
            return {}, math.inf
        if not within and not (reclaim and flavor.borrowed > EPS):
            return {}, math.inf
        lists: dict[str, tuple[tuple[int, ...], float]] = {}
        retry = math.inf
        # A preemptor admitted in this instant is no candidate in it (``fair_admitted``): a
        # look that left one out holds only for this instant.
        fresh, skipped, admitted = self.fair_admitted_last == t, False, self.fair_admitted
        now = self._fair_now(name, t)
        order = self.fair_order.get(name, {})
        own = order.get(job.project) if within else None
        if own:
            mine = self._priority(j, t)
            found, retry = self._fair_own(job.project, own, name, mine, t, now)
            picked, gpus, skipped = found
            if picked:
                lists[job.project] = (picked, gpus)
        if not reclaim:
            return lists, math.nextafter(t, math.inf) if skipped else retry
        floor: _Share | None = None
        before = flavor.usage.get(job.project)
        used = (before or 0.0) + job.gpus
        if not lists and used > guarantee + EPS:
            attempt.use[job.project] = used
            floor = attempt.share(job.project)
            if before is None:
                del attempt.use[job.project]
            else:
                attempt.use[job.project] = before
        borrowers, top = self._fair_borrowers(j, flavor, name, attempt)
        if floor is not None and _none_reach(top, job.project, floor):
            # No other queue's share reaches the floor: none gives a candidate, nor will
            # until one does (``_fair_below``).
            until = math.nextafter(t, math.inf) if skipped else retry
            self.fair_below[self._fair_memo(j, name, t)] = (
                floor,
                self.fair_used.get((pool, job.project), 0),
                until,
            )
            return lists, until
        forbidden, cls = FORBIDDEN, self.cls
        for project, share in borrowers:
            if project == job.project:
                continue
            attempt.shares[project] = share
            if floor is not None and share < floor:
                continue
            memo = (name, project, None)
            theirs = now.get(memo)
            if theirs is None:
                taken = [r[2] for r in order.get(project, ()) if cls[r[2]].kind != forbidden]
                left_out = False
                if fresh:
                    kept = [v for v in taken if admitted.get(v) != t]
                    if len(kept) < len(taken):
                        left_out, taken = True, kept
                theirs = now[memo] = self._fair_found(taken, left_out)
            picked, gpus, left_out = theirs
            skipped = skipped or left_out
            if picked:
                lists[project] = (picked, gpus)
        return lists, math.nextafter(t, math.inf) if skipped else retry

    def _fair_now(self, name: str, t: float) -> dict[tuple[str, str, float | None], _Found]:
        """What looks on the pool find the same until a usage of the pool changes
        (``fair_version``) or time passes: per queue its candidates (``_fair_candidates``)."""
        stamp = (self.fair_version.get(name.partition("/")[0], 0), t)
        if self.fair_now_at != stamp:
            self.fair_now_at, self.fair_now, self.fair_own_retry = stamp, {}, {}
        return self.fair_now

    def _fair_found(self, picked: list[int], left_out: bool) -> _Found:
        """A queue's candidates, their GPUs, and whether one was left out as admitted in
        this instant."""
        jobs = self.jobs
        return tuple(picked), sum(jobs[v].gpus for v in picked), left_out

    def _fair_own(
        self,
        project: str,
        ranks: list[tuple[float, float, int]],
        name: str,
        mine: float,
        t: float,
        now: dict[tuple[str, str, float | None], _Found],
    ) -> tuple[_Found, float]:
        """The candidates of the preemptor's own queue (its lower priorities that may lose
        their GPUs now; ``ranks``: its running jobs by ``_fair_rank``), and until when the
        others stay protected: the same for every look at its priority while ``now`` holds
        (``_fair_now``)."""
        memo = (name, project, mine)
        found = now.get(memo)
        if found is not None:
            return found, self.fair_own_retry[memo]
        fresh, admitted = self.fair_admitted_last == t, self.fair_admitted
        picked: list[int] = []
        retry, left_out = math.inf, False
        lower = []
        for rank in ranks:
            if rank[0] >= mine:
                break
            lower.append(rank[2])
        for v, again in self._eligible(lower, t):
            if again is not None:
                retry = min(retry, again)
                continue
            if fresh and admitted.get(v) == t:
                left_out = True
                continue
            picked.append(v)
        found = now[memo] = self._fair_found(picked, left_out)
        self.fair_own_retry[memo] = retry
        return found, retry

    def _fair_borrowers(
        self, j: int, flavor: _Flavor, name: str, attempt: _Attempt | None = None
    ) -> tuple[list[tuple[str, _Share]], list[tuple[_Share, str]]]:
        """The queues with running work above their nominal quota on the flavor
        (``cqIsBorrowing``) with their shares, in the flavor's order, and the two highest
        shares: kept until a usage of the pool changes (``fair_version``). A share does not
        depend on the look (``j``'s, or ``attempt``: the preemptor's own is not read here)."""
        version = self.fair_version.get(name.partition("/")[0], 0)
        kept = self.fair_shares.get(name)
        if kept is not None and kept[0] == version:
            return kept[1], kept[2]
        if attempt is None:
            attempt = _Attempt(self, j, flavor, name)
        running = self.fair_running.get(name, {})
        quotas = flavor.quotas
        borrowers = []
        for project, used in flavor.usage.items():
            if project not in running:
                continue
            quota = quotas.get(project)
            if used <= (quota.guarantee if quota is not None else 0.0) + EPS:
                continue
            borrowers.append((project, attempt.share(project)))
        top = heapq.nlargest(2, ((share, project) for project, share in borrowers))
        self.fair_shares[name] = (version, borrowers, top)
        return borrowers, top

    def _fair_targets(
        self, j: int, flavor: _Flavor, name: str, t: float
    ) -> tuple[list[int] | None, float]:
        """``fairPreemptions``: the targets that let ``j`` fit, or None; and until when a
        look that found none holds."""
        attempt = _Attempt(self, j, flavor, name)
        found, retry = self._fair_candidates(j, flavor, name, attempt, t)
        if not found or not attempt.may_fit({p: gpus for p, (_q, gpus) in found.items()}):
            return None, retry
        # Each queue's candidates by ``CandidatesOrdering`` (its own queue's last), as filed.
        lists = {project: deque(queue) for project, (queue, _gpus) in found.items()}
        project = attempt.project
        attempt.use[project] = attempt.use.get(project, 0.0) + attempt.gpus
        strategies = [STRATEGIES[s] for s in self.kueue.strategies] or [
            _less_or_equal_final,
            _less_initial,
        ]
        fits, refused = self._fair_first(attempt, lists, strategies[0])
        if not fits and len(strategies) > 1:
            fits = self._fair_second(attempt, refused)
        attempt.use[project] -= attempt.gpus
        if not fits:
            return None, retry
        # ``fillBackWorkloads``: the last but one first, put back while it still fits.
        targets = attempt.targets
        for i in range(len(targets) - 2, -1, -1):
            v = targets[i]
            job = self.jobs[v]
            attempt.use[job.project] += job.gpus
            if attempt.gpus <= attempt.available() + EPS:
                targets[i] = targets[-1]
                targets.pop()
            else:
                attempt.use[job.project] -= job.gpus
        return targets, retry

    def _fair_first(
        self,
        attempt: _Attempt,
        lists: dict[str, deque[int]],
        strategy: Callable[[_Share, _Share, _Share], bool],
    ) -> tuple[bool, dict[str, deque[int]]]:
        """``runFirstFsStrategy``: whether it fits, and per queue the first candidate the
        strategy refused (the second strategy takes at most that one)."""
        project = attempt.project
        pruned: set[str] = set()
        refused: dict[str, deque[int]] = {}
        quota = attempt.flavor.quotas.get(project)
        within_nominal = (
            attempt.use.get(project, 0.0) <= (quota.guarantee if quota is not None else 0.0) + EPS
        )
        gpus_of = self.jobs
        attempt.shares.pop(project, None)  # its work counted in its share from here

        def order(v: int) -> tuple[bool, float, float, int]:
            return self._fair_order(v, project)

        while True:
            target = attempt.next_queue(lists, pruned, order)
            if target is None:
                return False, refused
            queue = lists[target]
            if target == project or within_nominal:
                attempt.remove(queue.popleft())
                if attempt.fits():
                    return True, refused
                continue
            preemptor, old = attempt.current(project), attempt.current(target)
            # The verdict depends on the candidate's GPUs only (the queue's usage is the same
            # until one is taken).
            verdicts: dict[float, bool] = {}
            while queue:
                v = queue.popleft()
                gpus = gpus_of[v].gpus
                ok = verdicts.get(gpus)
                if ok is None:
                    attempt.use[target] -= gpus
                    new = attempt.share(target)
                    attempt.use[target] += gpus
                    ok = verdicts[gpus] = strategy(preemptor, old, new)
                if ok:
                    attempt.remove(v)
                    if attempt.fits():
                        return True, refused
                    break
                if target not in refused:
                    refused[target] = deque((v,))

    def _fair_second(self, attempt: _Attempt, lists: dict[str, deque[int]]) -> bool:
        """``runSecondFsStrategy``: per queue at most one refused candidate (its first), taken
        when the preemptor's share is below the queue's."""
        project = attempt.project
        pruned: set[str] = set()

        def order(v: int) -> tuple[bool, float, float, int]:
            return self._fair_order(v, project)

        while True:
            target = attempt.next_queue(lists, pruned, order)
            if target is None:
                return False
            if _less_initial(attempt.current(project), attempt.current(target), _NOT_BORROWING):
                attempt.remove(lists[target].popleft())
                if attempt.fits():
                    return True
            pruned.add(target)
