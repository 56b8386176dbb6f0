"""What makes a project starved in the review: its jobs waited for resources (the pool had no
free GPUs) in hours when it ran below its guarantee, and it received less than half its
guaranteed GPU-hours. Waiting on quota while below the guarantee (a job larger than what is
left of it: the project's own limit) is not starvation. On the rollup's hours, end to end.

One day, A100s of the Training pool (``world``: Vision guarantees 24, Speech 16):

- Vision runs 8 GPUs all day (192 of 576 guaranteed GPU-hours); a 32-GPU job waits on quota
  00:00–12:00 and never starts: 12 hours waiting on quota, all below its guarantee.
- Speech runs 4 GPUs all day (96 of 384); an 8-GPU job waits for resources 00:00–03:00, then
  runs to 04:00: 3 hours waiting for resources below its guarantee.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import translation

from queues.models import JobState, WorkloadJob
from queues.services.workload.rollup import workload_hours_roll_up
from reports.selectors import review_metrics
from reports.selectors.findings import FindingKind, finding_text, review_findings
from reports.selectors.stored_reviews import review_tables
from reports.selectors.stored_reviews.tables import _service
from tests.reports.conftest import service_row

W0 = datetime(2026, 3, 1, tzinfo=UTC)
W1 = W0 + timedelta(days=1)


def _job(world, name: str, project, **fields) -> WorkloadJob:
    last = fields.get("ended_at") or fields.get("started_at") or fields["submitted_at"]
    return WorkloadJob.objects.create(
        source="test", job_id=name, key=name, name=name, project=project, tier=world.key,
        flavor=world.a100, last_event_at=last, **fields,
    )  # fmt: skip


@pytest.fixture
def month(world):
    vision, speech = world.vision, world.speech
    _job(world, "v-run", vision, gpus=8, submitted_at=W0, started_at=W0, ended_at=W1,
         state=JobState.COMPLETED, category="")  # fmt: skip
    _job(world, "v-quota", vision, gpus=32, submitted_at=W0, ended_at=W0 + timedelta(hours=12),
         state=JobState.CANCELLED, category="quota")  # fmt: skip
    _job(world, "s-run", speech, gpus=4, submitted_at=W0, started_at=W0, ended_at=W1,
         state=JobState.COMPLETED, category="")  # fmt: skip
    _job(world, "s-resource", speech, gpus=8, submitted_at=W0,
         started_at=W0 + timedelta(hours=3), ended_at=W0 + timedelta(hours=4),
         state=JobState.COMPLETED, category="resource")  # fmt: skip
    workload_hours_roll_up(until=W1)
    return world


@pytest.mark.django_db
def test_waiting_for_resources_below_the_guarantee_is_starved_waiting_on_quota_is_not(month):
    metrics = review_metrics(start=W0, end=W1, pool="training")
    rows = {row["project"]: row for row in metrics["service"]["by_project"]}
    assert (rows["vision"]["gpu_hours"], rows["vision"]["guaranteed_gpu_hours"]) == (192, 576)
    assert rows["vision"]["quota_wait_hours"] == 12.0
    assert rows["vision"]["resource_wait_below_guarantee_hours"] == 0.0
    # Speech: 4 × 24 + 8 × 1 = 104 of 384.
    assert (rows["speech"]["gpu_hours"], rows["speech"]["guaranteed_gpu_hours"]) == (104, 384)
    assert rows["speech"]["quota_wait_hours"] == 0.0
    assert rows["speech"]["resource_wait_below_guarantee_hours"] == 3.0
    findings = review_findings(metrics=metrics, start=W0, end=W1)
    starved = [f for f in findings if f["kind"] == FindingKind.STARVED]
    assert [f["project"] for f in starved] == ["speech"]
    assert finding_text(starved[0]) == (
        "Speech received 104 GPU-hours in training against 384 guaranteed: in 3 hours its jobs "
        "waited for free GPUs while it ran below its guarantee."
    )
    with translation.override("zh-hans"):
        assert "等待空闲 GPU" in finding_text(starved[0])
    table = review_tables(metrics=metrics)["service"]
    assert table.columns[-2:] == [
        "Hours waiting on quota",
        "Hours waiting for resources below the guarantee",
    ]
    assert {row[0]: row[-2:] for row in table.rows} == {"Vision": [12.0, 0.0], "Speech": [0.0, 3.0]}


@pytest.mark.django_db
def test_waiting_for_resources_at_the_guarantee_is_not_starved(month):
    """Speech running its whole guarantee (16 GPUs) in the hours its job waited for resources:
    the guarantee was honoured; it wanted to borrow."""
    _job(month, "s-full", month.speech, gpus=12, submitted_at=W0, started_at=W0,
         ended_at=W0 + timedelta(hours=3), state=JobState.COMPLETED, category="")  # fmt: skip
    workload_hours_roll_up(until=W1)
    metrics = review_metrics(start=W0, end=W1, pool="training")
    rows = {row["project"]: row for row in metrics["service"]["by_project"]}
    assert rows["speech"]["resource_wait_below_guarantee_hours"] == 0.0
    kinds = [f["kind"] for f in review_findings(metrics=metrics, start=W0, end=W1)]
    assert FindingKind.STARVED not in kinds


def test_a_review_frozen_before_keeps_its_service_column():
    """A review built when the column counted the hours waiting on quota below the guarantee
    shows that column, under its own name; one built before shows it empty ("–"), as they
    were."""
    row = service_row("vision", "Vision", quota_wait_hours=5.0)
    del row["resource_wait_below_guarantee_hours"]
    row["quota_wait_below_guarantee_hours"] = 4.0
    metrics = {"service": {"by_project": [row]}}
    table = _service(metrics, project=None, human=False)
    assert table.columns[-1] == "Of which below the guarantee" and table.rows[0][-2:] == [5.0, 4.0]
    del row["quota_wait_below_guarantee_hours"]
    table = _service(metrics, project=None, human=False)
    assert table.columns[-1] == "Of which below the guarantee" and table.rows[0][-1] is None
