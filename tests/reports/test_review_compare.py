"""Comparing two built reviews side by side, the changes highlighted."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from reports import selectors, services
from reports.selectors.stored_reviews import review_compare
from tests.conftest import login
from tests.reports.conftest import by_project, sample_metrics

START = datetime(2026, 10, 1, tzinfo=UTC)
END = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture
def two_reviews(ops, world, monkeypatch):
    first = services.review_request(user=ops, start=START, end=END)
    with monkeypatch.context() as patch:
        patch.setattr(selectors, "review_metrics_by_project", by_project(sample_metrics))
        first = services.review_build(review_id=first.pk)

    def better(**kwargs):
        metrics = sample_metrics(**kwargs)
        metrics["waits"]["overall"]["p90"] = 1800.0  # 90 → 30 minutes
        metrics["capacity"]["total"]["idle_while_quota_waiting_gpu_hours"] = 500.0
        metrics["preemptions"]["total"]["count"] = 4
        return metrics

    second = services.review_request(user=ops, start=START, end=END)
    with monkeypatch.context() as patch:
        patch.setattr(selectors, "review_metrics_by_project", by_project(better))
        second = services.review_build(review_id=second.pk)
    return first, second


def test_the_deltas_say_which_way_and_whether_it_is_worse(two_reviews):
    first, second = two_reviews
    sections = dict(review_compare(a=first, b=second))
    overall = {row.label: row for row in sections["Waits, all jobs"]}
    p90 = overall["p90 wait (min)"]
    assert (p90.a, p90.b, p90.delta, p90.direction, p90.worse) == (90.0, 30.0, -60.0, -1, False)
    capacity = {row.label: row for row in sections["Capacity"]}
    # Per day of the 31-day window: 310.5 → 500 GPU-hours is 10.02 → 16.13 a day.
    idle = capacity["Idle while a project waited on quota (GPU-hours a day)"]
    assert (idle.a, idle.b, idle.delta, idle.worse) == (10.02, 16.13, 6.11, True)
    same = {row.label: row for row in sections["Preemptions, exceptions and findings"]}
    assert same["Preemptions a day"].direction == 0 and same["Preemptions a day"].worse is None


def test_a_longer_month_is_not_worse_for_its_extra_days(ops, world, monkeypatch):
    """September (30 days) and October (31) with the same GPU-hours a day compare equal."""

    def month(start: datetime, end: datetime, daily: float):
        def metrics(**kwargs):
            built = sample_metrics(**kwargs)
            days = (end - start).days
            built["capacity"]["total"]["allocated_gpu_hours"] = daily * days
            built["capacity"]["total"]["idle_gpu_hours"] = 10.0 * days
            built["preemptions"]["total"]["gpu_hours_lost"] = 2.0 * days
            return built

        review = services.review_request(user=ops, start=start, end=end)
        with monkeypatch.context() as patch:
            patch.setattr(selectors, "review_metrics_by_project", by_project(metrics))
            return services.review_build(review_id=review.pk)

    september = month(datetime(2026, 9, 1, tzinfo=UTC), datetime(2026, 10, 1, tzinfo=UTC), 96)
    october = month(datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC), 96)
    sections = dict(review_compare(a=september, b=october))
    capacity = {row.label: row for row in sections["Capacity"]}
    for label in ("Allocated (GPU-hours a day)", "Idle (GPU-hours a day)"):
        assert capacity[label].direction == 0 and capacity[label].worse is None, label
    lost = {row.label: row for row in sections["Preemptions, exceptions and findings"]}
    assert lost["GPU-hours lost a day"].a == lost["GPU-hours lost a day"].b == 2.0


def test_the_compare_page_highlights_changes(ops, lead, two_reviews):
    first, second = two_reviews
    url = reverse("report_compare") + f"?a={first.pk}&b={second.pk}"
    page = login(ops).get(url).content.decode()
    assert 'class="delta--better"' in page and 'class="delta--worse"' in page
    assert "−60.0" in page or "-60.0" in page
    assert login(ops).get(reverse("report_compare") + "?a=x&b=2").status_code == 400
    assert login(lead).get(url).status_code == 403
    assert login(ops).get(reverse("report_compare") + f"?a={first.pk}&b=999").status_code == 404
