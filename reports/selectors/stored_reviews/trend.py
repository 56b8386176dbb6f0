"""The waits' trend over the twelve months up to a review: one point per built review of the
same scope (its latest version per window), read from their frozen figures — the trend costs
one query however large the reviews are, and shows what each review said."""

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import plotly.graph_objects as go
from django.db.models.fields.json import KT
from django.utils import formats, timezone
from django.utils.translation import gettext as _

from reports.models import MonthlyReview, ReviewStatus

from ._format import minutes
from .style import PALETTE, figure_json, figure_layout
from .tables import Table

TREND_MONTHS = 12


@dataclass
class TrendPoint:
    start: Any
    review: int
    by_tier: list[dict[str, Any]]


def review_trend(*, review: MonthlyReview) -> list[TrendPoint]:
    """The built reviews of ``review``'s scope whose window starts in the twelve months up
    to its own (itself included), oldest first, the newest version of each window."""
    since = review.start - timedelta(days=366)
    rows = (
        MonthlyReview.objects.filter(
            status=ReviewStatus.DONE,
            pool=review.pool,
            project=review.project,
            start__gt=since,
            start__lte=review.start,
        )
        .annotate(by_tier=KT("metrics__waits__by_tier"))
        .order_by("start", "end", "-version")
        .values("pk", "start", "end", "by_tier")
    )
    points: dict[tuple[Any, Any], TrendPoint] = {}
    for row in rows:
        key = (row["start"], row["end"])
        if key in points:
            continue  # an older version of the same window
        by_tier = row["by_tier"]
        if isinstance(by_tier, str):  # KT gives the key's JSON text
            by_tier = json.loads(by_tier)
        points[key] = TrendPoint(start=row["start"], review=row["pk"], by_tier=by_tier or [])
    return list(points.values())[-TREND_MONTHS:]


def _month(point: TrendPoint) -> str:
    return formats.date_format(timezone.localtime(point.start), "YEAR_MONTH_FORMAT")


def trend_table(points: list[TrendPoint]) -> Table:
    rows = [
        [
            _month(point),
            row.get("name") or row.get("tier") or _("None"),
            row["jobs"],
            minutes(row["p50"]),
            minutes(row["p90"]),
            row["over_threshold"],
            minutes(row.get("threshold_seconds")),
        ]
        for point in points
        for row in point.by_tier
    ]
    columns = [
        (_("Month"), False),
        (_("Tier"), False),
        (_("Jobs"), True),
        (_("p50 wait (min)"), True),
        (_("p90 wait (min)"), True),
        (_("Over the threshold"), True),
        (_("Threshold (min)"), True),
    ]
    return Table(
        key="waits_trend",
        title=_("p90 wait by tier, the last 12 months"),
        columns=[label for label, _numeric in columns],
        rows=rows,
        numeric=[numeric for _label, numeric in columns],
    )


def trend_figure(points: list[TrendPoint]) -> dict[str, Any]:
    """p90 wait per tier and month (a line per tier, its threshold dotted in its colour)."""
    figure = go.Figure(layout=figure_layout(y_title=_("p90 wait (minutes)"), height=340))
    months = [_month(point) for point in points]
    tiers: dict[Any, str] = {}
    for point in points:
        for row in point.by_tier:
            tiers.setdefault(row.get("tier"), row.get("name") or _("None"))
    for index, (tier, name) in enumerate(tiers.items()):
        color = PALETTE[index % len(PALETTE)]
        rows = [next((r for r in point.by_tier if r.get("tier") == tier), None) for point in points]
        figure.add_trace(
            go.Scatter(
                x=months,
                y=[minutes(row["p90"]) if row else None for row in rows],
                mode="lines+markers",
                name=_("%(tier)s p90") % {"tier": name},
                line={"color": color},
            )
        )
        targets = [minutes(row.get("threshold_seconds")) if row else None for row in rows]
        if any(target is not None for target in targets):
            figure.add_trace(
                go.Scatter(
                    x=months,
                    y=targets,
                    mode="lines",
                    name=_("%(tier)s threshold") % {"tier": name},
                    line={"color": color, "dash": "dot", "width": 2},
                )
            )
    # Months as categories: written in the reader's language, in order.
    figure.update_layout(xaxis={"type": "category", "automargin": True})
    return figure_json(figure)
