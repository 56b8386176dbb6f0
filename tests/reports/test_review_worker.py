"""The build task through the real broker and a real Celery worker process, twice."""

from datetime import UTC, datetime, timedelta

import pytest
from celery.exceptions import TimeoutError as CeleryTimeoutError

from reports import services, tasks
from reports.models import MonthlyReview, ReviewStatus
from tests.governance.test_worker import RESULT_TIMEOUT_SECONDS, worker  # noqa: F401 (fixture)
from tests.reports.test_review_immutability import _job

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

START = datetime(2026, 10, 1, tzinfo=UTC)
END = datetime(2026, 11, 1, tzinfo=UTC)


def test_a_worker_builds_a_review_once(worker, ops, world, monkeypatch):  # noqa: F811
    from queues.services.workload.ingest import events_ingest

    events_ingest(events=_job(world, "1", START + timedelta(days=2), timedelta(minutes=10)))
    # The request's own queueing would go to the default queue, which this test's worker
    # does not read; the test sends the task to the worker's queue itself.
    monkeypatch.setattr(services, "_queue_build", lambda review_id: None)
    review = services.review_request(user=ops, start=START, end=END)

    def run() -> str:
        result = tasks.review_build.apply_async(args=[review.pk], queue=worker.queue)
        try:
            return result.get(timeout=RESULT_TIMEOUT_SECONDS)
        except CeleryTimeoutError:
            pytest.fail(f"No result within {RESULT_TIMEOUT_SECONDS} s ({worker.describe()})")

    assert run() == "done", worker.describe()
    review.refresh_from_db()
    assert review.status == ReviewStatus.DONE
    assert review.metrics["waits"]["overall"]["jobs"] == 1
    built_at = review.built_at
    assert run() == "done"
    review.refresh_from_db()
    assert review.built_at == built_at
    assert MonthlyReview.objects.count() == 1
