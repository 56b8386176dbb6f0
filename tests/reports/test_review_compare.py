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
    idle = capacity["Idle while a project waited on quota"]
    assert (idle.delta, idle.worse) == (189.5, True)
    same = {row.label: row for row in sections["Preemptions, exceptions and findings"]}
    assert same["Preemptions"].direction == 0 and same["Preemptions"].worse is None


def test_the_compare_page_highlights_changes(ops, lead, two_reviews):
    first, second = two_reviews
    url = reverse("report_compare") + f"?a={first.pk}&b={second.pk}"
    page = login(ops).get(url).content.decode()
    assert 'class="delta--better"' in page and 'class="delta--worse"' in page
    assert "−60.0" in page or "-60.0" in page
    assert login(ops).get(reverse("report_compare") + "?a=x&b=2").status_code == 400
    assert login(lead).get(url).status_code == 403
    assert login(ops).get(reverse("report_compare") + f"?a={first.pk}&b=999").status_code == 404
