"""The demo's workload history, replayed under its rules: tiers ordered, preemptions only where
the classes allow, work running now, every category; idempotent. Its last full month's review
shows every tier's waits in the tiers' order and service following the guarantees."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from governance import services as rules
from governance.models import PreemptionKind, Quota
from queues.models import JobState, WaitCategory, WorkloadEvent, WorkloadJob
from queues.selectors import definitions
from queues.services.workload.demo import demo_workload_seed
from queues.services.workload.rollup import workload_hours_roll_up
from reports.selectors.review import review_metrics
from reports.services import month_window

NOW = datetime(2026, 12, 3, 9, tzinfo=UTC)
ORDER = ["production", "key-project", "regular", "exploratory"]  # highest score first


def _p90(values: list[float]) -> float:
    values = sorted(values)
    return values[int(len(values) * 0.9)]


@pytest.mark.django_db
def test_the_demo_history_obeys_its_rules_and_reruns_store_nothing():
    rules.demo_seed(password="pw")
    out = StringIO()
    call_command("seed_demo_workload", "--days", "14", stdout=out)
    assert "events stored" in out.getvalue()
    jobs = WorkloadJob.objects.filter(source="demo")
    # Every category: three from the rules, two from what no rule decides.
    assert {
        WaitCategory.RESOURCE,
        WaitCategory.QUOTA,
        WaitCategory.QUEUE_RULE,
        WaitCategory.DEPENDENCY,
        WaitCategory.PLACEMENT,
    } <= set(jobs.values_list("category", flat=True))
    pending = set(jobs.filter(state=JobState.PENDING).values_list("category", flat=True))
    assert {WaitCategory.QUOTA, WaitCategory.DEPENDENCY, WaitCategory.PLACEMENT} <= pending
    # Work is running at the moment the demo starts.
    assert jobs.filter(state=JobState.RUNNING).exists()
    # Tiers ordered as configured: production waits least, then key projects.
    # (A job's wait as docs/definitions.md defines it: its first, submit to first start.)
    waits: dict[str, list[float]] = {}
    started = list(jobs.exclude(started_at=None).select_related("tier"))
    firsts = definitions.first_starts(started)
    for job in started:
        first = firsts.get(job.pk) if definitions.needs_events(job) else job.started_at
        wait = definitions.job_wait(job, now=timezone.now(), started=first)
        waits.setdefault(job.tier.slug if job.tier else "", []).append(wait.seconds if wait else 0)
    assert _p90(waits["production"]) < _p90(waits["key-project"]) < _p90(waits["regular"])
    # Preemptions only where the classes allow: never of never-preempt work.
    preempted = jobs.filter(preemptions__gt=0)
    assert preempted.exists() and preempted.filter(gpu_seconds_lost__gt=0).exists()
    never = Quota.objects.filter(preemption_class__kind=PreemptionKind.FORBIDDEN)
    for quota in never:
        assert not preempted.filter(project=quota.project, flavor=quota.flavor).exists()
    assert jobs.filter(state=JobState.CANCELLED, started_at=None).exists()
    count = jobs.count()
    again = StringIO()
    call_command("seed_demo_workload", "--days", "14", stdout=again)
    assert "0 events stored" in again.getvalue() and jobs.count() == count


@pytest.mark.django_db
@pytest.mark.parametrize("args, message", [(["--days", "0"], "between"), ([], "seed_demo")])
def test_bad_demo_input(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("seed_demo_workload", *args)


@pytest.mark.django_db
def test_the_demos_last_full_month_shows_the_tiers_in_order_and_service_near_guarantees():
    rules.demo_seed(password="pw", now=NOW)
    demo_workload_seed(days=63, now=NOW)  # from early October: November in full
    workload_hours_roll_up(until=NOW)
    start, end = month_window(year=2026, month=11)
    metrics = review_metrics(start=start, end=end)
    by_tier = {row["tier"]: row for row in metrics["waits"]["by_tier"]}
    assert [row["tier"] for row in metrics["waits"]["by_tier"]] == ORDER
    # The review's p90 wait rises tier by tier as the tiers are ordered; the median too (most
    # production and key-project jobs start at once: their medians are 0).
    p90 = [by_tier[tier]["p90"] for tier in ORDER]
    assert p90[0] < p90[1] < p90[2] < p90[3], p90
    p50 = [by_tier[tier]["p50"] for tier in ORDER]
    assert p50[0] <= p50[1] < p50[2] < p50[3], p50
    # Service follows the guarantees: the training projects receive about their guarantee
    # (some borrow beyond it), serving keeps headroom in its own.
    service = metrics["service"]["by_project"]
    serving = {"assistant", "fraud", "recsys"}
    for row in service:
        received = row["gpu_hours"] / row["guaranteed_gpu_hours"]
        if row["pool"] == "training" and row["project"] not in serving:
            assert 0.7 < received < 1.4, row
        if row["pool"] == "inference" and row["project"] in serving:
            assert received < 0.6, row
    assert sum(row["borrowed_gpu_hours"] for row in service) > 0
    # Preemptions, only of classes that allow them.
    kinds = {row["class_kind"] for row in metrics["preemptions"]["by_tier_class"]}
    assert kinds and PreemptionKind.FORBIDDEN not in kinds


@pytest.mark.django_db
def test_a_second_load_keeps_the_stored_history_after_the_requests_date_their_grants_back():
    """`make run` loads the history, then the requests, whose approved grants are dated back
    into that history; loading again (each `make run`) replays under rules the history did
    not know. It stores nothing within the hour, and later only what happens after the last
    load: no stored job gets a second story."""
    rules.demo_seed(password="pw")
    call_command("seed_demo_workload", "--days", "14", stdout=StringIO())
    call_command("seed_demo_approvals", stdout=StringIO())
    events = WorkloadEvent.objects.filter(source="demo")
    count = events.count()
    again = StringIO()
    call_command("seed_demo_workload", "--days", "14", stdout=again)
    assert "0 events stored" in again.getvalue(), again.getvalue()
    assert events.count() == count
    loaded = timezone.now().replace(minute=0, second=0, microsecond=0)
    newest = events.order_by("-pk").values_list("pk", flat=True).first()
    demo_workload_seed(days=14, now=loaded + timedelta(hours=3))
    added = events.filter(pk__gt=newest)
    assert added.exists()
    assert not added.filter(time__lte=loaded).exists()
