"""The demo's workload history, replayed under its rules: tiers ordered, preemptions only where
the classes allow, work running now, every category; idempotent."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from governance import services as rules
from governance.models import PreemptionKind, Quota
from queues.models import JobState, WaitCategory, WorkloadJob


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
    waits: dict[str, list[float]] = {}
    for tier, waited in jobs.exclude(started_at=None).values_list("tier__slug", "waited_seconds"):
        waits.setdefault(tier, []).append(waited or 0)
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
