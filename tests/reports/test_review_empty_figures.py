"""An empty chart says "no data" in words, without axes (it used to draw blank axes, one of
them from −1 to 6); a chart with data keeps its axes."""

from datetime import UTC, datetime

import pytest
from django.utils import translation

from reports.selectors import review_metrics
from reports.selectors.stored_reviews import review_figures

pytestmark = pytest.mark.django_db


def test_every_figure_of_an_empty_window_says_no_data(world):
    metrics = review_metrics(
        start=datetime(2026, 10, 1, tzinfo=UTC), end=datetime(2026, 11, 1, tzinfo=UTC)
    )
    figures = review_figures(metrics=metrics)
    assert figures
    for key, figure in figures.items():
        texts = [a.get("text") for a in figure["layout"].get("annotations", [])]
        has_points = any(
            len(trace.get("y") or trace.get("x") or []) for trace in figure.get("data", [])
        )
        if has_points:
            continue
        assert texts == ["No data in this window"], key
        assert figure["layout"]["xaxis"]["visible"] is False, key
        assert figure["layout"]["yaxis"]["visible"] is False, key
    with translation.override("zh-hans"):
        chinese = review_figures(metrics=metrics)
    assert any(
        a.get("text") == "此时间窗口内没有数据"
        for figure in chinese.values()
        for a in figure["layout"].get("annotations", [])
    )
