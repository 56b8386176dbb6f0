"""A built review keeps its numbers when later evidence arrives; a new version sees it.

Uses the real ``review_metrics`` on evidence stored through the ingest path."""

from datetime import UTC, datetime, timedelta

from queues.models import EventKind, JobState
from queues.services.workload.ingest import JobEvent, events_ingest
from reports import services
from reports.models import ReviewStatus

START = datetime(2026, 10, 1, tzinfo=UTC)
END = datetime(2026, 11, 1, tzinfo=UTC)


def _job(world, job_id: str, submitted: datetime, waited: timedelta) -> list[JobEvent]:
    common = {
        "source": "test",
        "job_id": job_id,
        "project": world.vision,
        "tier": world.key,
        "flavor": world.a100,
        "gpus": 2,
        "submitted_at": submitted,
    }
    return [
        JobEvent(event_id=f"{job_id}:submit", time=submitted, kind=EventKind.SUBMITTED, **common),
        JobEvent(
            event_id=f"{job_id}:start",
            time=submitted + waited,
            kind=EventKind.STARTED,
            state=JobState.RUNNING,
            **common,
        ),
    ]


def test_a_built_review_does_not_change_when_later_evidence_arrives(ops, world):
    events_ingest(events=_job(world, "1", START + timedelta(days=2), timedelta(minutes=10)))
    first = services.review_build(
        review_id=services.review_request(user=ops, start=START, end=END).pk
    )
    assert first.status == ReviewStatus.DONE, first.error
    frozen = (first.metrics, first.project_metrics, first.findings, first.built_at)
    assert first.metrics["waits"]["overall"]["jobs"] == 1
    assert first.metrics["waits"]["overall"]["p50"] == 600

    # Evidence of the same window arrives late (a collector catching up).
    events_ingest(events=_job(world, "2", START + timedelta(days=3), timedelta(minutes=50)))
    first.refresh_from_db()
    assert (first.metrics, first.project_metrics, first.findings, first.built_at) == frozen

    second = services.review_build(
        review_id=services.review_request(user=ops, start=START, end=END).pk
    )
    assert second.status == ReviewStatus.DONE, second.error
    assert second.version == 2
    assert second.metrics["waits"]["overall"]["jobs"] == 2
    assert second.metrics["waits"]["overall"]["p50"] == 1800
    first.refresh_from_db()
    assert first.metrics["waits"]["overall"]["jobs"] == 1
