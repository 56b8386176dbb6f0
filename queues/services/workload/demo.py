"""The demo organisation's job history, produced by the replay engine under its own rules.

A generated workload (``queues.replay.workload``: a working-day cycle, quieter weekends, most
work at the project's tier and a fifth one tier lower, sizes within the tier's per-job cap,
log-normal run times, a few users who give up after waiting hours) is replayed through
``queues.replay`` under the demo's effective rules with their grants as periods
(``queues.replay.adapt.rules_timeline``), up to now. Its starts, waits with their reasons,
preemptions and requeues, ends and cancellations become events fed through ``events_ingest``.

How much a project asks for follows its tier (``DEMAND``), as on a real shared pool where the
projects with the least standing over-ask the most: never-preempt serving work 40 % of its
guarantee (it never borrows and keeps headroom), other production work 80 %, key projects
100 %, regular projects 120 % and the exploratory sandbox 200 % (a working day's mean;
weekends at half the rate bring a week's mean to 6/7 of it). The top tiers' work, their
overflow one tier down included, so mostly runs within its guarantee; the regular projects
borrow at the peaks and wait for borrowed GPUs, their exploratory overflow waits behind their
own regular work, and the sandbox waits most. So the reviews show the tiers' waits in the
tiers' order, service following guarantees and preemptions only where the classes allow;
jobs are running and waiting at the moment the demo starts (``docs/replay.md`` has the
figures).

Two kinds of wait the rules do not cause are added as they happen on real clusters: a few
jobs waiting on another job (``Dependency``) and on a constraint no node has
(``BadConstraints``), submitted in the last hours.

Deterministic and idempotent: the history starts at the first demo job already stored (else
``days`` ago), the workload's random numbers are seeded by that day and the simulation is
causal, so running it again stores nothing twice and on a later day adds what happened since.
"""

from __future__ import annotations

import dataclasses
import math
import random
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Min
from django.utils import timezone

from governance.models import GpuFlavor, PriorityTier, Project, Quota
from governance.services.demo import demo_lock
from queues.models import (
    Cluster,
    ClusterBackend,
    CollectorState,
    EventKind,
    JobState,
    WorkloadEvent,
    WorkloadJob,
    WorkloadWait,
)
from queues.replay import Job, Rules, replay
from queues.replay.adapt import rules_timeline
from queues.replay.rules import FORBIDDEN
from queues.replay.workload import ProjectLoad, generate

from ..demo import demo_clusters_by_pool, demo_clusters_ensure, demo_wait
from .ingest import IngestResult, JobEvent, events_ingest

SOURCE = "demo"
PREFIX = "demo-"
SIZES = {1.0: 2.0, 2.0: 3.0, 4.0: 3.0, 8.0: 2.0}
MEDIAN_MINUTES = 300.0
SIGMA = 0.9
LOWER_SHARE = 0.2  # of a project's work sent one tier below its own
# Of its guarantee, on a working day's mean, a project asks for this much by its tier's rank,
# highest first: serving-tier and key projects about their guarantee or less, regular projects
# a fifth over it, the exploratory sandbox twice it. Never-preempt work (serving) never borrows
# and keeps headroom in its guarantee.
DEMAND = (0.8, 1.0, 1.2, 2.0)
NEVER_PREEMPT_DEMAND = 0.4
GIVE_UP = (0.03, 3 * 3600.0)  # share of jobs whose user cancels them, and after how long
FAILED = 0.03
NOT_THE_RULES = [("Dependency", 2), ("BadConstraints", 1)]
# The demo's people among the generated users of their project, so that "My waiting jobs"
# shows the README's logins their own jobs; and one job of ``member`` that asks for a node
# feature no node has (Vision trains on the Kueue cluster, which knows no job dependencies).
DEMO_PEOPLE = {"vision-u0": "member", "vision-u1": "lead"}
MEMBER_JOB = ("vision", "member", "BadConstraints")


def _demand(rank: int) -> float:
    """How much of its guarantee a project asks for, on average, by its tier's rank (0: the
    highest tier); the lowest tiers' projects over-ask, as on a real shared pool."""
    return DEMAND[min(rank, len(DEMAND) - 1)]


def _loads(rules: Rules) -> list[ProjectLoad]:
    by_score = sorted(rules.tiers, key=lambda tier: -tier.score)
    classes = {cls.slug: cls for cls in rules.classes}
    loads = []
    for quota in rules.quotas:
        if quota.guarantee <= 0:
            continue
        top = rules.tier(rules.project_tiers.get(quota.project) or rules.default_tier)
        below = next((tier for tier in by_score if tier.score < top.score), None)
        cls = classes.get(quota.preemption_class)
        never = cls is not None and cls.kind == FORBIDDEN
        rank = by_score.index(top)
        target = quota.guarantee * (NEVER_PREEMPT_DEMAND if never else _demand(rank))
        for tier, share in ((top, 1 - LOWER_SHARE), (below, LOWER_SHARE)):
            if tier is None:
                continue
            cap = min(
                tier.max_gpus_per_job or math.inf, quota.guarantee + (quota.borrow_limit or 0)
            )
            if never:
                cap = min(cap, max(1.0, quota.guarantee / 4))
            sizes = {size: weight for size, weight in SIZES.items() if size <= cap} or {1.0: 1.0}
            load = ProjectLoad(
                quota.project, tier.slug, quota.flavor, 1.0, sizes, MEDIAN_MINUTES, SIGMA
            )
            rate = target * share / (load.mean_gpus() * load.mean_hours())
            loads.append(dataclasses.replace(load, jobs_per_hour=rate, users=3))
    return loads


def _workload(rules: Rules, *, start: datetime, now: datetime) -> list[Job]:
    seed = start.date().toordinal()
    days = (now - start).total_seconds() / 86400
    jobs: list[Job] = []
    for n, load in enumerate(_loads(rules)):
        prefix = f"{PREFIX}{load.flavor.replace('/', '.')}-{n}"
        jobs += generate([load], start=start.timestamp(), days=days, seed=seed, prefix=prefix)
    rng = random.Random(seed)
    share, after = GIVE_UP
    return [
        dataclasses.replace(job, patience=after) if rng.random() < share else job
        for job in sorted(jobs, key=lambda job: (job.arrival, job.name))
    ]


def _event(job: str, suffix: str, at: float, kind: EventKind, **extra: Any) -> JobEvent:
    return JobEvent(
        source=SOURCE,
        event_id=f"{job}:{suffix}",
        job_id=job,
        time=datetime.fromtimestamp(at, tz=UTC),
        kind=kind,
        **extra,
    )


def _where(clusters: dict[str, Cluster], pool: str) -> dict[str, Any]:
    """The cluster of a job of ``pool`` (the demo's cluster serving it) and its scheduler."""
    cluster = clusters.get(pool)
    return {"cluster": cluster, "scheduler": cluster.backend if cluster else ClusterBackend.SLURM}


def _history_events(
    rules_start: datetime, now: datetime, clusters: dict[str, Cluster]
) -> list[JobEvent]:
    timeline = rules_timeline(start=rules_start, end=now)
    jobs = _workload(timeline[0][1], start=rules_start, now=now)
    result = replay(jobs, timeline, until=now.timestamp())
    projects = {project.slug: project for project in Project.objects.all()}
    tiers = {tier.slug: tier for tier in PriorityTier.objects.all()}
    flavors = {flavor.slug: flavor for flavor in GpuFlavor.objects.all()}
    reasons: dict[int, list[tuple[float, str]]] = {}
    for j, since, token in result.reasons:
        reasons.setdefault(j, []).append((since, token))
    runs: dict[int, list[tuple[float, float]]] = {}
    for j, start, end in result.runs:
        runs.setdefault(j, []).append((start, end))
    horizon = now.timestamp()
    events: list[JobEvent] = []
    for j, job in enumerate(jobs):
        if job.arrival > horizon:
            continue
        name = job.name
        pool, flavor = job.flavor.split("/", 1)
        head = {
            **_where(clusters, pool),
            "project": projects[job.project],
            "tier": tiers.get(result.tiers[j]),
            "flavor": flavors[flavor],
            "gpus": int(job.gpus),
            "user_name": DEMO_PEOPLE.get(job.user, job.user),
        }
        scheduler = head["scheduler"]
        events.append(_event(name, "s", job.arrival, EventKind.SUBMITTED, **head))
        its_runs = sorted(runs.get(j, []))
        starts = [start for start, _ in its_runs]
        for k, (since, token) in enumerate(reasons.get(j, [])):
            if not token:
                continue
            at = since + 1 if since == job.arrival else since  # after the submission
            if any(since <= start <= at for start in starts):
                continue
            words = demo_wait(scheduler=scheduler, token=token, flavor=flavor, gpus=job.gpus)
            events.append(_event(name, f"p{k}", at, EventKind.PENDING, **words))
        for k, (start, end) in enumerate(its_runs):
            events.append(_event(name, f"r{k}", start, EventKind.STARTED))
            if k < len(its_runs) - 1:  # preempted, requeued
                events.append(_event(name, f"x{k}", end, EventKind.PREEMPTED, reason="Preempted"))
                events.append(_event(name, f"q{k}", end, EventKind.REQUEUED))
        if not math.isnan(result.end[j]):
            failed = zlib.crc32(name.encode()) % 1000 < FAILED * 1000
            state = JobState.FAILED if failed else JobState.COMPLETED
            events.append(_event(name, "e", result.end[j], EventKind.ENDED, state=state))
        elif j in result.cancelled:
            at = result.cancelled[j]
            events.append(_event(name, "c", at, EventKind.ENDED, state=JobState.CANCELLED))
    return events


def _not_the_rules(now: datetime, clusters: dict[str, Cluster]) -> list[JobEvent]:
    """A few jobs waiting on what no rule decides: another job, a constraint no node has (on
    a Slurm cluster's pool: Kueue knows no dependencies); and ``member``'s own job."""
    quotas = Quota.objects.select_related("project__tier", "flavor", "pool")
    quota = (
        quotas.filter(pool__clusters__in=[c for c in clusters.values() if c.backend == "slurm"])
        .order_by("project__slug", "pk")
        .first()
    ) or quotas.order_by("project__slug", "pk").first()
    if quota is None:
        return []
    events = []
    for reason, count in NOT_THE_RULES:
        for n in range(count):
            job = f"{PREFIX}{now:%Y%m%d}-{reason.lower()}-{n}"
            submit = (now - timedelta(minutes=20 + 40 * n)).timestamp()
            events += _waiting(job, submit, reason, quota, clusters, gpus=4)
    slug, user_name, reason = MEMBER_JOB
    quota = quotas.filter(project__slug=slug).order_by("pk").first()
    if quota is not None:
        job = f"{PREFIX}{now:%Y%m%d}-{user_name}-0"
        submit = (now - timedelta(hours=26, minutes=15)).timestamp()
        events += _waiting(job, submit, reason, quota, clusters, gpus=8, user_name=user_name)
    return events


def _waiting(
    job: str,
    submit: float,
    reason: str,
    quota: Quota,
    clusters: dict[str, Cluster],
    **extra: Any,
) -> list[JobEvent]:
    """A job of ``quota``'s project and flavor submitted at ``submit``, waiting for ``reason``."""
    head = {
        **_where(clusters, quota.pool.slug),
        "project": quota.project,
        "tier": quota.project.tier,
        "flavor": quota.flavor,
        "constraints": "nvlink" if reason == "BadConstraints" else "",
        **extra,
    }
    words = demo_wait(
        scheduler=head["scheduler"], token=reason, flavor=quota.flavor.slug, gpus=extra["gpus"]
    )
    return [
        _event(job, "s", submit, EventKind.SUBMITTED, **head),
        _event(job, "p", submit + 1, EventKind.PENDING, **words),
    ]


@transaction.atomic
def demo_workload_seed(*, days: int = 90, now: datetime | None = None) -> IngestResult:
    """Feed the demo organisation's replayed history through ``events_ingest`` (idempotent),
    each job on the demo cluster serving its pool (``demo_clusters_ensure`` first). Runs
    started together load one after the other (``demo_lock``): the later stores nothing."""
    demo_lock()
    # Up to the hour: running it again within the hour stores nothing new.
    now = (now or timezone.now()).replace(minute=0, second=0, microsecond=0)
    demo_clusters_ensure(now=now)
    clusters = demo_clusters_by_pool()
    first = WorkloadJob.objects.filter(source=SOURCE, job_id__startswith=PREFIX).aggregate(
        first=Min("submitted_at")
    )["first"]
    start = now - timedelta(days=days)
    if first is not None and first < start + timedelta(days=1):
        start = first  # the history already stored: extend the same simulation
    start = start.replace(hour=0, minute=0, second=0, microsecond=0)
    horizon = _loaded_until(clusters)
    if first is not None and horizon is not None and horizon >= now:
        return IngestResult()  # loaded up to this hour already
    events = _history_events(start, now, clusters) + _not_the_rules(now, clusters)
    kept = 0
    if first is not None and horizon is not None:
        # The history up to the last load stays as stored: the rules replayed now may differ
        # (seed_demo_approvals dates its grants back into it), and a second simulation of the
        # same hours would give stored jobs a second, contradicting story.
        kept = len(events)
        events = [event for event in events if event.time > horizon]
        kept -= len(events)
    result = events_ingest(events=events)
    result.duplicates += kept
    _loaded_until_set(clusters, now)
    _statistics_refresh()
    return result


def _loaded_until(clusters: dict[str, Cluster]) -> datetime | None:
    """How far the demo's history was loaded: the demo clusters' collection watermark (the
    collector never runs on them: they are disabled)."""
    states = CollectorState.objects.filter(cluster__in=set(clusters.values()))
    marks = [state.watermark for state in states]
    known = [mark for mark in marks if mark is not None]
    return min(known) if known and len(known) == len(marks) else None


def _loaded_until_set(clusters: dict[str, Cluster], now: datetime) -> None:
    for cluster in set(clusters.values()):
        state, _created = CollectorState.objects.get_or_create(cluster=cluster)
        state.watermark = now
        state.full_clean()
        state.save()


def _statistics_refresh() -> None:
    """PostgreSQL plans the review's queries from its statistics of the workload tables; after
    the demo's bulk load of a quarter's history (before autovacuum has looked) refresh them, or a
    review built right after (``seed_demo_reviews``) may get a plan made for empty tables."""
    if connection.vendor != "postgresql":
        return
    tables = ", ".join(
        connection.ops.quote_name(model._meta.db_table)
        for model in (WorkloadJob, WorkloadEvent, WorkloadWait)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {tables}")
