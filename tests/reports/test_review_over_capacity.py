"""Usage above a pool's capacity is flagged on the review: its jobs cannot have run more GPUs
than the pool holds, so either the evidence or the declared capacity is wrong (a trace mapped
onto a pool 12 times too small said nothing before). Jobs of no flavor count in their pool."""

from datetime import UTC, datetime, timedelta

from django.urls import reverse

from governance import services as governance
from queues.models import EventKind, JobState
from queues.services.workload import JobEvent, events_ingest
from reports import services
from reports.models import ReviewStatus
from reports.selectors.stored_reviews import review_findings_shown
from tests.conftest import REASON, login

START = datetime(2026, 10, 1, tzinfo=UTC)
END = datetime(2026, 11, 1, tzinfo=UTC)
T0 = START + timedelta(days=3)


def path(url):
    """A proposal's page, without the finding it carries (``?reason=``)."""
    return url.split("?", 1)[0]


def job(name, gpus, hours, **keys):
    common = {"source": "hpc", "job_id": name, "gpus": gpus, **keys}
    return [
        JobEvent(event_id=f"{name}:s", time=T0, kind=EventKind.SUBMITTED, **common),
        JobEvent(event_id=f"{name}:r", time=T0, kind=EventKind.STARTED, **common),
        JobEvent(
            event_id=f"{name}:e",
            time=T0 + timedelta(hours=hours),
            kind=EventKind.ENDED,
            state=JobState.COMPLETED,
            **common,
        ),
    ]


def build(ops):
    review = services.review_build(
        review_id=services.review_request(user=ops, start=START, end=END).pk
    )
    assert review.status == ReviewStatus.DONE, review.error
    return review


def test_a_pool_used_above_its_capacity_is_a_finding_with_its_figures(ops, world):
    # training holds 64 A100 + 32 H100 = 96 GPUs: 150 A100 and 50 GPUs of no flavor for 3 h.
    events = job("big", 150, 3, project=world.vision, pool=world.training, flavor=world.a100)
    events += job("nameless", 50, 3, project=world.vision, pool=world.training)
    # inference (16 A100) used within its capacity: no finding.
    events += job("small", 8, 5, project=world.speech, pool=world.inference, flavor=world.a100)
    assert events_ingest(events=events).rejected == 0
    review = build(ops)
    rows = review.metrics["capacity"]["over_capacity"]
    assert rows == [
        {
            "pool": "training",
            "pool_name": "Training",
            "used_gpu_hours": 600.0,
            "available_gpu_hours": 96.0 * 31 * 24,
            "hours_over": 3,
            "peak_ratio": round(200 / 96, 2),
        }
    ]
    shown = [f for f in review_findings_shown(review=review) if f["kind"] == "over_capacity"]
    assert len(shown) == 1
    assert shown[0]["text"] == (
        "Jobs in Training ran more GPUs than the pool holds in 3 hours (up to 2.1 times its "
        "capacity): 600 GPU-hours used against 71,424 available. The evidence or the declared "
        "capacity is wrong."
    )
    assert path(shown[0]["propose_url"]) == reverse("pool_capacity_edit", args=["training"])
    page = login(ops).get(reverse("report_detail", args=[review.pk])).content.decode()
    assert "Usage above the pool&#x27;s capacity" in page


def test_a_pool_without_capacity_that_ran_jobs_is_flagged_too(ops, world):
    empty = governance.pool_create(user=ops, reason=REASON, slug="philly", name="Philly VC")
    assert events_ingest(events=job("p", 4, 2, project=world.vision, pool=empty)).rejected == 0
    review = build(ops)
    (row,) = review.metrics["capacity"]["over_capacity"]
    assert (row["pool"], row["hours_over"], row["peak_ratio"]) == ("philly", 2, None)
    (shown,) = [f for f in review_findings_shown(review=review) if f["kind"] == "over_capacity"]
    assert "declares no capacity" in shown["text"] and "8 GPU-hours" in shown["text"]


def test_usage_within_capacity_is_no_finding(ops, world):
    events = job("fits", 96, 4, project=world.vision, pool=world.training, flavor=world.a100)
    assert events_ingest(events=events).rejected == 0
    review = build(ops)
    assert review.metrics["capacity"]["over_capacity"] == []
    assert not [f for f in review.findings if f["kind"] == "over_capacity"]
