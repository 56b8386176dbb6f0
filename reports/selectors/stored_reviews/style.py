"""The style every plotly figure of the reports shares (the replay's too): layout, palette,
the rule-change marks on a time axis, and "no data" in words for an empty figure."""

import json
from typing import Any

import plotly.graph_objects as go
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from ._format import timeline_kind

_FONT = {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 13}
PALETTE = ["#2563eb", "#0d9488", "#d97706", "#7c3aed", "#dc2626", "#64748b", "#059669"]


def figure_layout(*, y_title: str, height: int = 340, **extra: Any) -> go.Layout:
    return go.Layout(
        height=height,
        margin={"l": 56, "r": 16, "t": 24, "b": 64},
        legend={"orientation": "h", "y": -0.25},
        yaxis={"title": {"text": y_title}, "rangemode": "tozero", "gridcolor": "#e2e8f0"},
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
        font=_FONT,
        **extra,
    )


def annotate_timeline(figure: go.Figure, timeline: list[dict[str, Any]]) -> None:
    """Rule changes and grants as dashed vertical lines with a short label on a time axis."""
    for item in timeline:
        at = parse_datetime(item["at"])
        if at is None:
            continue
        change = item["kind"] == "change"
        figure.add_shape(
            type="line",
            xref="x",
            yref="paper",
            x0=at.isoformat(),
            x1=at.isoformat(),
            y0=0,
            y1=1,
            line={"color": "#7c3aed" if change else "#d97706", "width": 1, "dash": "dot"},
        )
        figure.add_annotation(
            x=at.isoformat(),
            xref="x",
            yref="paper",
            y=1,
            yanchor="bottom",
            showarrow=False,
            text=("Δ " if change else "★ ") + item["title"][:24],
            hovertext=f"{timeline_kind(item['kind'])}: {item['title']} ({item['object']})",
            font={"size": 10, "color": "#475569"},
        )


def _has_data(figure: go.Figure) -> bool:
    for trace in figure.data:
        for axis in ("y", "x", "values"):
            values = getattr(trace, axis, None)
            if values is not None and len(values):
                return True
    return False


def figure_json(figure: go.Figure) -> dict[str, Any]:
    """The figure as JSON data; one without a data point says so in words, without axes (an
    empty chart would draw blank axes with a made-up range)."""
    if not _has_data(figure):
        figure.update_layout(
            xaxis={"visible": False},
            yaxis={"visible": False},
            showlegend=False,
            shapes=[],
            annotations=[
                {
                    "text": str(_("No data in this window")),
                    "xref": "paper",
                    "yref": "paper",
                    "x": 0.5,
                    "y": 0.5,
                    "showarrow": False,
                    "font": {"size": 16, "color": "#64748b"},
                }
            ],
        )
    return json.loads(figure.to_json())
