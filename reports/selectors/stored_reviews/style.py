"""The style every plotly figure of the reports shares (the replay's too): layout, palette,
the rule-change marks on a time axis, and "no data" in words for an empty figure."""

import json
from typing import Any

import plotly.graph_objects as go
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from ._format import timeline_kind, timeline_title

_FONT = {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 13}
PALETTE = ["#2563eb", "#0d9488", "#d97706", "#7c3aed", "#dc2626", "#64748b", "#059669"]


def figure_layout(*, y_title: str, height: int = 340, **extra: Any) -> go.Layout:
    return go.Layout(
        height=height,
        margin={"l": 56, "r": 16, "t": 24, "b": 64},
        legend={"orientation": "h", "y": -0.25},
        # automargin: the axes' labels and titles get the room they need, never cut.
        xaxis={"automargin": True},
        yaxis={
            "title": {"text": y_title},
            "rangemode": "tozero",
            "gridcolor": "#e2e8f0",
            "automargin": True,
        },
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
        font=_FONT,
        **extra,
    )


def date_axis() -> dict[str, Any]:
    """A time axis written as the reader's language writes a day (plotly's own month names
    are English: the format is translated instead)."""
    # Translators: a plotly (d3) date format for a chart's day axis, as the pages write a
    # day: "%-m月%-d日".
    day = pgettext("plotly date axis", "%-d %b")
    return {"type": "date", "tickformat": day, "hoverformat": day, "gridcolor": "#e2e8f0"}


def _wrapped(text: str, width: int = 22) -> str:
    """The whole text, broken into lines of about ``width`` characters (plotly's <br>)."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def annotate_timeline(figure: go.Figure, timeline: list[dict[str, Any]]) -> None:
    """Rule changes and grants as dashed vertical lines, each with its whole title (wrapped,
    never cut) on a time axis; the labels alternate between two heights so that neighbours
    do not overlap."""
    figure.update_layout(xaxis=date_axis())
    if timeline:
        figure.update_layout(margin={"t": 96})
    for index, item in enumerate(timeline):
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
            y=1 if index % 2 == 0 else 1.14,
            yanchor="bottom",
            showarrow=False,
            text=_wrapped(("Δ " if change else "★ ") + timeline_title(item)),
            hovertext=f"{timeline_kind(item['kind'])}: {timeline_title(item)} ({item['object']})",
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
