"""Requesting and building stored reviews: versions per window, immutability once built,
the task's idempotency, and the monthly schedule."""

from datetime import UTC, date, datetime

import pytest
from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from governance import services as governance
from queues.models import JobState
from queues.services.workload.rollup import workload_hours_roll_up
from reports import selectors, services, tasks
from reports.models import MonthlyReview, ReviewStatus
from tests.conftest import REASON
from tests.reports.test_review_metrics import W0, W1, at, history, job  # noqa: F401

START = datetime(2026, 10, 1, tzinfo=UTC)
END = datetime(2026, 11, 1, tzinfo=UTC)


def test_a_review_is_built_with_its_metrics_findings_and_progress(ops, world, fake_metrics):
    review = services.review_request(user=ops, start=START, end=END)
    assert (review.status, review.version, review.progress) == (ReviewStatus.QUEUED, 1, 0)
    built = services.review_build(review_id=review.pk)
    assert built.status == ReviewStatus.DONE and built.progress == 100
    assert built.built_at is not None and built.requested_by == ops
    assert built.metrics["window"]["start"] == START.isoformat()
    assert set(built.project_metrics) == {"vision", "speech"}
    # One call for the whole site and every project's view.
    assert fake_metrics == [{"start": START, "end": END, "pool": None, "project": None,
                             "by_project": True}]  # fmt: skip
    kinds = [finding["kind"] for finding in built.findings]
    assert kinds == ["starved", "hoarded", "tier_over_threshold", "exceptions_over_policy"]


def test_rebuilding_a_window_makes_a_new_version(ops, world, fake_metrics):
    first = services.review_request(user=ops, start=START, end=END)
    services.review_build(review_id=first.pk)
    second = services.review_request(user=ops, start=START, end=END)
    other_scope = services.review_request(user=ops, start=START, end=END, pool="training")
    assert (first.version, second.version, other_scope.version) == (1, 2, 1)


def test_a_built_review_never_changes(ops, world, fake_metrics):
    review = services.review_build(
        review_id=services.review_request(user=ops, start=START, end=END).pk
    )
    frozen = (review.metrics, review.findings, review.built_at)
    # Building it again returns it as it is (the metrics are not even read again).
    calls = len(fake_metrics)
    again = services.review_build(review_id=review.pk)
    assert (again.metrics, again.findings, again.built_at) == frozen
    assert len(fake_metrics) == calls
    # The database refuses any write to a built review, whatever path it takes.
    review.metrics = {"changed": True}
    with pytest.raises(DatabaseError, match="review_built_is_immutable"), transaction.atomic():
        review.save()
    with pytest.raises(DatabaseError), transaction.atomic():
        MonthlyReview.objects.filter(pk=review.pk).update(progress=50)
    review.refresh_from_db()
    assert (review.metrics, review.findings, review.built_at) == frozen


def test_only_ops_request_and_the_window_is_checked(member, ops, world):
    with pytest.raises(PermissionDenied):
        services.review_request(user=member, start=START, end=END)
    with pytest.raises(ValidationError) as error:
        services.review_request(user=ops, start=END, end=START)
    assert "end" in error.value.message_dict
    with pytest.raises(ValidationError) as error:
        services.review_request(user=ops, start=START, end=datetime(2999, 1, 1, tzinfo=UTC))
    assert "has not ended yet" in error.value.message_dict["end"][0]
    with pytest.raises(ValidationError) as error:
        services.review_request(user=ops, start=START, end=END, pool="nowhere")
    assert "pool" in error.value.message_dict


def test_a_failed_build_is_recorded_and_can_run_again(ops, world, monkeypatch, fake_metrics):
    from reports import selectors

    review = services.review_request(user=ops, start=START, end=END)

    def broken(**kwargs):
        raise RuntimeError("the database went away")

    with monkeypatch.context() as patch:
        patch.setattr(selectors, "review_metrics_by_project", broken, raising=False)
        failed = services.review_build(review_id=review.pk)
    assert failed.status == ReviewStatus.FAILED
    assert "the database went away" in failed.error
    assert services.review_build(review_id=review.pk).status == ReviewStatus.DONE


def test_the_task_is_idempotent(
    ops, world, fake_metrics, eager, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        review = services.review_request(user=ops, start=START, end=END)
    assert len(callbacks) == 1  # queued once the request committed
    review.refresh_from_db()
    assert review.status == ReviewStatus.DONE
    built_at = review.built_at
    assert tasks.review_build.apply(args=[review.pk]).get() == "done"
    assert tasks.review_build.apply(args=[review.pk + 100]).get() == "gone"
    review.refresh_from_db()
    assert review.built_at == built_at
    assert MonthlyReview.objects.count() == 1


def test_the_schedule_builds_the_previous_month_once(world, fake_metrics, monkeypatch):
    review = services.review_request_scheduled(today=date(2026, 11, 1))
    assert review is not None and review.requested_by is None
    assert (review.start, review.end) == services.month_window(year=2026, month=10)
    assert services.review_request_scheduled(today=date(2026, 11, 1)) is None
    january = services.review_request_scheduled(
        today=date(2027, 1, 1), now=datetime(2027, 1, 1, 0, 30, tzinfo=UTC)
    )
    assert january is not None
    assert january.start == services.month_window(year=2026, month=12)[0]
    assert january.end.month == 1 and january.end.year == 2027


def test_the_beat_schedule_runs_the_monthly_review_on_the_first():
    entry = settings.CELERY_BEAT_SCHEDULE["monthly-review"]
    assert entry["task"] == "reports.tasks.monthly_review_schedule"
    schedule = entry["schedule"]
    assert schedule.day_of_month == {1}
    assert schedule.hour == {0} and schedule.minute == {30}
    from governance.celery import app

    app.loader.import_default_modules()
    assert "reports.tasks.monthly_review_schedule" in app.tasks


@pytest.mark.usefixtures("history")
def test_the_build_reads_every_projects_view_in_a_fixed_number_of_queries(
    world, ops, monkeypatch, django_assert_num_queries
):
    # The rollup's own work (it follows the clock: open jobs) is not the build's.
    workload_hours_roll_up()
    monkeypatch.setattr(services, "workload_hours_roll_up", lambda: None)

    def build() -> tuple[MonthlyReview, int]:
        review = services.review_request(user=ops, start=W0, end=W1)
        with CaptureQueriesContext(connection) as queries:
            built = services.review_build(review_id=review.pk)
        assert built.status == ReviewStatus.DONE, built.error
        return built, len(queries)

    first, count = build()
    assert set(first.project_metrics) == {"vision", "speech"}
    # Two more projects with jobs in the window: the same number of queries.
    for slug in ("audio", "robotics"):
        project = governance.project_create(user=ops, reason=REASON, slug=slug, name=slug)
        job(world, f"{slug}-1", project=project, gpus=1, submitted_at=at(2), started_at=at(3),
            ended_at=at(4), state=JobState.COMPLETED)  # fmt: skip
    workload_hours_roll_up()
    second, again = build()
    assert set(second.project_metrics) == {"vision", "speech", "audio", "robotics"}
    assert second.project_metrics["audio"]["waits"]["overall"]["jobs"] == 1
    assert again == count
    # The metrics of the site and of every project: a fixed number of statements (a savepoint
    # and its release, the rules' names (5), waits (1: every set's percentiles in one
    # sorted pass on one connection), service and capacity (4, the
    # capacity's history included), exceptions (3, and 3 for the approved ones' outcomes:
    # their jobs' medians, their tiers, the requests), preemptions (1), timeline (3), the jobs
    # whose waits were not recorded (1); on PostgreSQL also the waits' plan check (1) and the
    # five SET LOCAL settings).
    with django_assert_num_queries(29 if connection.vendor == "postgresql" else 23):
        selectors.review_metrics_by_project(start=W0, end=W1)
