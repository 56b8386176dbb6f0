"""The review shows what it counts (issue 25, must-do 4): per tier the jobs, those that never
started, those still waiting, p50/p90/p95/p99, the mean and the count over the target; each
tier's target drawn on the wait chart; twelve months' trend; human dates and whole labels, in
the reader's language (the metrics themselves are checked in ``test_review_metrics``)."""

from datetime import UTC, datetime
from itertools import pairwise

import pytest
from django.urls import reverse
from django.utils import translation

from reports import selectors, services
from reports.selectors.stored_reviews import (
    review_figures,
    review_tables,
    review_trend,
    trend_figure,
    trend_table,
)
from tests.conftest import login
from tests.reports.conftest import by_project, sample_metrics

pytestmark = pytest.mark.django_db

START = datetime(2026, 10, 1, tzinfo=UTC)
END = datetime(2026, 11, 1, tzinfo=UTC)


def metrics() -> dict:
    built = sample_metrics(start=START, end=END)
    key = built["waits"]["by_tier"][0]
    key.update(never_started=7, waiting_at_end=3, p95=8000.0, p99=9000.0, mean=1500.0)
    built["preemptions"]["by_tier_class"][0].update(class_kind="forbidden", early=0)
    built["waits"]["by_category"] = [
        {"category": "resource", "label": "Resource shortage", "jobs": 4, "wait_seconds": 60.0}
    ]
    return built


def test_the_tier_table_counts_never_started_waiting_percentiles_mean_and_over_target():
    table = review_tables(metrics=metrics())["waits_by_tier"]
    assert table.columns == [
        "Tier",
        "Jobs",
        "Never started",
        "Still waiting at the end",
        "p50 wait, all jobs (min)",
        "p90 wait, all jobs (min)",
        "p95 wait, all jobs (min)",
        "p99 wait, all jobs (min)",
        "Mean wait (min)",
        "Longest wait (min)",
        "Over the threshold",
        "Started jobs",
        "p50 wait, started jobs only (min)",
        "p90 wait, started jobs only (min)",
        "p95 wait, started jobs only (min)",
        "p99 wait, started jobs only (min)",
        "Threshold (min)",
    ]
    key = dict(zip(table.columns, table.rows[0], strict=True))
    assert (key["Never started"], key["Still waiting at the end"]) == (7, 3)
    assert (key["p95 wait, all jobs (min)"], key["Mean wait (min)"], key["Threshold (min)"]) == (
        133.3,
        25.0,
        60.0,
    )
    # A review built before these figures existed shows "–" (None), not a made-up zero.
    old = sample_metrics(start=START, end=END)
    for row in old["waits"]["by_tier"]:
        del row["never_started"], row["p95"], row["mean"]
    first = review_tables(metrics=old)["waits_by_tier"].rows[0]
    row = dict(zip(table.columns, first, strict=True))
    assert row["Never started"] is None and row["p95 wait, all jobs (min)"] is None
    assert row["Started jobs"] is None and row["p95 wait, started jobs only (min)"] is None
    assert row["Mean wait (min)"] is None


def test_each_tier_with_a_target_has_its_line_on_the_wait_chart():
    figure = review_figures(metrics=metrics())["waits_daily"]
    targets = [trace for trace in figure["data"] if "threshold" in trace["name"]]
    # Key project has a 60-minute target; Regular none.
    assert [(t["name"], list(t["y"])) for t in targets] == [
        ("Key project threshold (60 min)", [60.0, 60.0])
    ]
    assert targets[0]["line"]["dash"] == "dot"


def test_chart_labels_are_whole_and_the_date_axis_is_the_readers():
    long_title = "Raise Vision's guarantee on the training pool for the paper deadline"
    built = metrics()
    built["timeline"][0]["title"] = long_title
    figure = review_figures(metrics=built)["waits_daily"]
    labels = [a["text"].replace("<br>", " ") for a in figure["layout"]["annotations"]]
    assert "Δ " + long_title in labels
    assert figure["layout"]["xaxis"]["tickformat"] == "%-d %b"
    with translation.override("zh-hans"):
        figure = review_figures(metrics=built)["waits_daily"]
        assert figure["layout"]["xaxis"]["tickformat"] == "%-m月%-d日"
        assert figure["layout"]["yaxis"]["title"]["text"] == "p90 等待（分钟）"
        preemptions = review_figures(metrics=built)["preemptions"]
        assert preemptions["data"][0]["x"] == ["Regular · 禁止抢占"]


def test_dates_are_human_on_the_page_and_iso_in_the_api_and_csv():
    built = metrics()
    human = review_tables(metrics=built, human=True)
    iso = review_tables(metrics=built)
    assert iso["waits_daily"].rows[0][0] == "2026-10-01"
    assert human["waits_daily"].rows[0][0] == "1 Oct 2026"
    assert human["idle"].rows[0][0] == "1 Oct 2026"
    assert human["timeline"].rows[0][0] == "10 Oct 2026, 00:00"
    with translation.override("zh-hans"):
        chinese = review_tables(metrics=built, human=True)
        assert chinese["waits_daily"].rows[0][0] == "2026年10月1日"
        assert chinese["timeline"].rows[0][0] == "2026年10月10日 00:00"
        # Categories and preemption classes in Chinese too.
        assert chinese["preemptions"].rows[0][1] == "禁止抢占"
        assert chinese["waits_by_category"].rows[0][0] == "资源不足"


def _build(ops, monkeypatch, start: datetime, end: datetime, p90: float):
    def month(**kwargs):
        built = sample_metrics(**kwargs)
        built["waits"]["by_tier"][0]["p90"] = p90
        return built

    review = services.review_request(user=ops, start=start, end=end)
    with monkeypatch.context() as patch:
        patch.setattr(selectors, "review_metrics_by_project", by_project(month))
        return services.review_build(review_id=review.pk)


def test_the_trend_shows_twelve_months_of_reviews_newest_version_each(ops, world, monkeypatch):
    months = [datetime(2025, m, 1, tzinfo=UTC) for m in range(8, 13)] + [
        datetime(2026, m, 1, tzinfo=UTC) for m in range(1, 12)
    ]
    reviews = [
        _build(ops, monkeypatch, start, end, p90=60.0 * (index + 1))
        for index, (start, end) in enumerate(pairwise(months))
    ]
    # October again, a newer version: the trend reads it, not the first.
    newer = _build(ops, monkeypatch, months[-2], months[-1], p90=6000.0)
    points = review_trend(review=newer)
    assert len(points) == 12
    assert points[0].start == datetime(2025, 11, 1, tzinfo=UTC)
    assert points[-1].review == newer.pk
    table = trend_table(points)
    key_rows = [row for row in table.rows if row[1] == "Key project"]
    assert key_rows[0][0] == "November 2025" and key_rows[-1][4] == 100.0  # 6000 s
    figure = trend_figure(points)
    (p90,) = [trace for trace in figure["data"] if trace["name"] == "Key project p90"]
    assert len(p90["x"]) == 12 and p90["y"][-1] == 100.0
    (target,) = [trace for trace in figure["data"] if trace["name"] == "Key project threshold"]
    assert set(target["y"]) == {60.0}
    page = login(ops).get(reverse("report_detail", args=[reviews[0].pk])).content.decode()
    assert "figure-waits-trend" in page
    # The window and the build time as the reader's language writes them, not ISO.
    assert "1 Aug 2025, 00:00 – 1 Sep 2025, 00:00" in page


def test_an_exceptions_outcome_reads_in_minutes_against_the_tiers_median():
    built = metrics()
    built["exceptions"]["outcomes"] = [
        {
            "request": 1,
            "project": "vision",
            "name": "Vision",
            "kind": "quota_exception",
            "starts_at": "2026-10-03T08:00:00+00:00",
            "ends_at": "2026-10-05T08:00:00+00:00",
            "jobs": 12,
            "p50": 1200.0,  # 20 minutes; Key project's median is 600 s (sample_metrics)
            "tier": "key",
        }
    ]
    key_p50 = built["waits"]["by_tier"][0]["p50"]
    (row,) = review_tables(metrics=built, human=True)["exception_outcomes"].rows
    later = (1200.0 - key_p50) / 60
    assert row[2] == "3 Oct 2026, 08:00" and row[4:6] == [12, 20.0]
    assert row[-1] == f"Started {later:g} minutes later than the tier's median"
    built["exceptions"]["outcomes"][0]["p50"] = 0.0
    with translation.override("zh-hans"):
        (row,) = review_tables(metrics=built, human=True)["exception_outcomes"].rows
        assert row[-1] == f"比层级中位数早 {key_p50 / 60:g} 分钟开始"
    # A review built before outcomes existed shows none.
    del built["exceptions"]["outcomes"]
    assert review_tables(metrics=built)["exception_outcomes"].rows == []


def test_the_preemption_counts_stand_upright_above_their_bars():
    (bars,) = review_figures(metrics=metrics())["preemptions"]["data"]
    assert (bars["textposition"], bars["textangle"]) == ("outside", 0)


def test_exception_counts_have_whole_number_ticks():
    figure = review_figures(metrics=metrics())["exceptions"]
    assert figure["layout"]["yaxis"]["tickformat"] == ",d"
    assert figure["layout"]["yaxis"]["dtick"] >= 1
