"""The demo's workload history: every category, preemptions, long waiters; idempotent."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from governance import services as rules
from queues.models import JobState, WaitCategory, WorkloadJob


@pytest.mark.django_db
def test_the_demo_history_has_every_category_and_reruns_store_nothing():
    rules.demo_seed(password="pw")
    out = StringIO()
    call_command("seed_demo_workload", "--days", "14", stdout=out)
    assert "events stored" in out.getvalue()
    jobs = WorkloadJob.objects.filter(source="demo")
    pending = set(jobs.filter(state=JobState.PENDING).values_list("category", flat=True))
    assert {
        WaitCategory.RESOURCE,
        WaitCategory.QUOTA,
        WaitCategory.QUEUE_RULE,
        WaitCategory.DEPENDENCY,
        WaitCategory.PLACEMENT,
    } <= pending
    assert jobs.filter(preemptions__gt=0, gpu_seconds_lost__gt=0).exists()
    assert jobs.filter(state=JobState.CANCELLED, started_at=None).exists()
    assert jobs.filter(waited_seconds__gte=3 * 3600).exists()  # long waiters
    count = jobs.count()
    again = StringIO()
    call_command("seed_demo_workload", "--days", "14", stdout=again)
    assert "0 events stored" in again.getvalue() and jobs.count() == count


@pytest.mark.django_db
@pytest.mark.parametrize("args, message", [(["--days", "0"], "between"), ([], "seed_demo")])
def test_bad_demo_input(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("seed_demo_workload", *args)
