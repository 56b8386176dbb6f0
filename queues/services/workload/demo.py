"""A realistic 90-day workload history for the demo organisation, through the ingest path.

Daily load cycles (more submissions in working hours), a deadline burst every two weeks,
waits of every category (with a few long waiters each), preemptions with requeues, and some
jobs still waiting now. Deterministic per calendar day (the job ids carry the date and the
random numbers are seeded by it), so running it again on the same day stores nothing new and
on a later day adds only the missing days.
"""

from __future__ import annotations

import random
from datetime import date, datetime, time, timedelta
from typing import Any

from django.utils import timezone

from governance.models import GpuFlavor, PriorityTier, Project, Quota
from queues.models import EventKind, JobState

from .ingest import IngestResult, JobEvent, events_ingest

SOURCE = "demo"
REASONS = [
    ("Resources", 40),
    ("Priority", 25),
    ("QOSGrpGRES", 15),
    ("AssocGrpGRES", 6),
    ("Dependency", 8),
    ("ReqNodeNotAvail", 3),
    ("BadConstraints", 1),
    ("JobHeldUser", 2),
]
NOW_WAITING = ["Resources", "QOSGrpGRES", "Priority", "Dependency", "BadConstraints"]


def _next(job: str, suffix: str, moment: datetime, kind: EventKind, **extra: Any) -> JobEvent:
    return JobEvent(
        source=SOURCE, event_id=f"{job}:{suffix}", job_id=job, time=moment, kind=kind, **extra
    )


def _day_events(
    day: date, project: Project, tier: PriorityTier | None, flavor: GpuFlavor, jobs: int
) -> list[JobEvent]:
    rng = random.Random(f"{day.isoformat()}:{project.slug}")
    burst = day.toordinal() % 14 in (12, 13)  # two days before a fortnightly deadline
    count = jobs * (3 if burst else 1) // (2 if day.weekday() >= 5 else 1)
    reasons, weights = zip(*REASONS, strict=True)
    zone = timezone.get_current_timezone()
    now = timezone.now()
    events = []
    for n in range(count):
        hour = min(23, max(0, int(rng.gauss(14, 4))))  # the working-day cycle
        submit = timezone.make_aware(datetime.combine(day, time(hour, rng.randint(0, 59))), zone)
        job = f"{day:%Y%m%d}-{project.slug}-{n}"
        reason = rng.choices(reasons, weights)[0]
        wait = rng.expovariate(1 / (1800 if burst else 600))
        if rng.random() < 0.02:  # a long waiter
            wait += rng.uniform(3, 10) * 3600
        run = rng.uniform(0.5, 12) * 3600
        head = {
            "scheduler": "slurm",
            "project": project,
            "tier": tier,
            "flavor": flavor,
            "gpus": rng.choice((1, 1, 2, 4, 8)),
            "user_name": f"{project.slug}-user{rng.randint(1, 4)}",
            "constraints": "nvlink" if reason == "BadConstraints" else "",
        }
        start = submit + timedelta(seconds=wait)
        events += [
            _next(job, "s", submit, EventKind.SUBMITTED, **head),
            _next(job, "p", submit + timedelta(seconds=1), EventKind.PENDING, reason=reason),
        ]
        if start > now:
            continue
        if reason == "BadConstraints" or rng.random() < 0.03:  # gave up waiting
            events.append(_next(job, "c", start, EventKind.ENDED, state=JobState.CANCELLED))
            continue
        events.append(_next(job, "r", start, EventKind.STARTED))
        end = start + timedelta(seconds=run)
        if rng.random() < 0.05:  # preempted part-way, requeued, waits again, runs again
            cut = start + timedelta(seconds=run / 3)
            again = cut + timedelta(seconds=rng.expovariate(1 / 900))
            events += [
                _next(job, "x", cut, EventKind.PREEMPTED, reason="Preempted"),
                _next(job, "q", cut, EventKind.REQUEUED),
                _next(job, "p2", cut + timedelta(seconds=1), EventKind.PENDING, reason="Priority"),
                _next(job, "r2", again, EventKind.STARTED),
            ]
            end = again + timedelta(seconds=run)
        if end < now:
            state = JobState.FAILED if rng.random() < 0.04 else JobState.COMPLETED
            events.append(_next(job, "e", end, EventKind.ENDED, state=state))
    return events


def _waiting_now(
    project: Project, tier: PriorityTier | None, flavor: GpuFlavor, today: date
) -> list[JobEvent]:
    """A job of each category still waiting, submitted today."""
    events = []
    now = timezone.now()
    for n, reason in enumerate(NOW_WAITING):
        job = f"{today:%Y%m%d}-{project.slug}-waiting-{n}"
        submit = now - timedelta(minutes=15 + 20 * n)
        head = {
            "scheduler": "slurm",
            "project": project,
            "tier": tier,
            "flavor": flavor,
            "gpus": 4,
            "constraints": "nvlink" if reason == "BadConstraints" else "",
        }
        events += [
            _next(job, "s", submit, EventKind.SUBMITTED, **head),
            _next(job, "p", submit + timedelta(seconds=1), EventKind.PENDING, reason=reason),
        ]
    return events


def demo_workload_seed(
    *, days: int = 90, jobs_per_day: int = 12, today: date | None = None
) -> IngestResult:
    """Feed the demo organisation's history through ``events_ingest`` (idempotent)."""
    today = today or timezone.localdate()
    quotas = Quota.objects.select_related("project", "project__tier", "flavor").order_by("pk")
    default = PriorityTier.objects.filter(is_default=True).first()
    seen: set[int] = set()
    events: list[JobEvent] = []
    for quota in quotas:
        if quota.project_id in seen:
            continue
        seen.add(quota.project_id)
        tier = quota.project.tier or default
        for offset in range(days, 0, -1):
            day = today - timedelta(days=offset)
            events += _day_events(day, quota.project, tier, quota.flavor, jobs_per_day)
        events += _waiting_now(quota.project, tier, quota.flavor, today)
    return events_ingest(events=events)
