"""The review's plotly figures as JSON data, keyed like its tables."""

import math
from typing import Any

import plotly.graph_objects as go
from django.utils.translation import gettext as _

from ._format import class_label, minutes, tier_names
from .style import PALETTE, annotate_timeline, figure_json, figure_layout


def review_figures(*, metrics: dict[str, Any], project: str | None = None) -> dict[str, dict]:
    """The review's plotly figures as JSON data (for ``json_script``), keyed like its tables."""
    service_rows = [row for row in metrics["service"]["by_project"] if _mine(row, project)]
    return {
        "waits_daily": figure_json(_waits_daily(metrics)),
        "service": figure_json(_service(service_rows)),
        "lending": figure_json(_lending(service_rows)),
        "idle": figure_json(_idle(metrics)),
        "preemptions": figure_json(_preemptions(metrics)),
        "exceptions": figure_json(_exceptions(metrics, project)),
    }


def _mine(row: dict[str, Any], project: str | None) -> bool:
    return project is None or row.get("project") == project


def _waits_daily(metrics: dict[str, Any]) -> go.Figure:
    """Each tier's daily p90 and p50 waits, with its threshold as a level line."""
    names = tier_names(metrics)
    thresholds = {
        row["tier"]: minutes(row["threshold_seconds"])
        for row in metrics["waits"]["by_tier"]
        if row.get("threshold_seconds") is not None
    }
    waits = go.Figure(layout=figure_layout(y_title=_("p90 wait (minutes)"), height=380))
    tiers: dict[Any, list[dict[str, Any]]] = {}
    for row in metrics["waits"]["daily_by_tier"]:
        tiers.setdefault(row["tier"], []).append(row)
    for index, (tier, rows) in enumerate(tiers.items()):
        color = PALETTE[index % len(PALETTE)]
        label = names.get(tier, tier or _("None"))
        waits.add_trace(
            go.Scatter(
                x=[row["day"] for row in rows],
                y=[minutes(row["p90"]) for row in rows],
                mode="lines+markers",
                name=_("%(tier)s p90") % {"tier": label},
                line={"color": color},
            )
        )
        waits.add_trace(
            go.Scatter(
                x=[row["day"] for row in rows],
                y=[minutes(row["p50"]) for row in rows],
                mode="lines",
                name=_("%(tier)s p50") % {"tier": label},
                line={"color": color, "dash": "dash", "width": 1},
            )
        )
        target = thresholds.get(tier)
        if target is not None and rows:
            # The tier's threshold (its wait alert, its target): a level line in its colour.
            waits.add_trace(
                go.Scatter(
                    x=[rows[0]["day"], rows[-1]["day"]],
                    y=[target, target],
                    mode="lines",
                    name=_("%(tier)s threshold (%(minutes)s min)")
                    % {"tier": label, "minutes": _whole(target)},
                    line={"color": color, "dash": "dot", "width": 2},
                    hoverinfo="name",
                )
            )
    annotate_timeline(waits, metrics["timeline"])
    return waits


# Horizontal bars: project names stay readable however many there are.
def _project_labels(rows: list[dict[str, Any]]) -> list[str]:
    return [f"{row['name']} · {row['pool'] or '–'}" for row in rows]


def _bars(labels: list[str], name: str, values: list[float], color: str) -> go.Bar:
    return go.Bar(name=name, y=labels, x=values, orientation="h", marker_color=color)


def _by_project_layout(
    labels: list[str], x_title: str, barmode: str, bars_per_row: int
) -> go.Layout:
    height = max(240, 110 + (12 * bars_per_row + 14) * len(labels))
    layout = figure_layout(y_title="", height=height, barmode=barmode)
    layout.update(
        xaxis={"title": {"text": x_title}, "gridcolor": "#e2e8f0"},
        yaxis={"autorange": "reversed", "automargin": True, "dtick": 1},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"},
        margin={"l": 16, "r": 16, "t": 40, "b": 48},
    )
    return layout


def _service(rows: list[dict[str, Any]]) -> go.Figure:
    """Each project's GPU-hours received beside its guarantee and its use of it."""
    labels = _project_labels(rows)
    return go.Figure(
        data=[
            _bars(labels, _("GPU-hours received"), [r["gpu_hours"] for r in rows], "#2563eb"),
            _bars(
                labels,
                _("GPU-hours guaranteed"),
                [r["guaranteed_gpu_hours"] for r in rows],
                "#94a3b8",
            ),
            _bars(
                labels,
                _("Used within the guarantee"),
                [r["within_guarantee_gpu_hours"] for r in rows],
                "#0d9488",
            ),
        ],
        layout=_by_project_layout(labels, _("GPU-hours"), "group", 3),
    )


def _lending(rows: list[dict[str, Any]]) -> go.Figure:
    """Each project's borrowed GPU-hours above zero, its lent ones below."""
    labels = _project_labels(rows)
    return go.Figure(
        data=[
            _bars(
                labels,
                _("Borrowed (GPU-hours)"),
                [r["borrowed_gpu_hours"] for r in rows],
                "#d97706",
            ),
            _bars(labels, _("Lent (GPU-hours)"), [-r["lent_gpu_hours"] for r in rows], "#0d9488"),
        ],
        layout=_by_project_layout(labels, _("GPU-hours (lent below zero)"), "relative", 1),
    )


def _idle(metrics: dict[str, Any]) -> go.Figure:
    """Allocated and idle GPU-hours a day, and the idle ones while a project waited on quota."""
    days = metrics["capacity"]["daily"]
    idle = go.Figure(
        data=[
            go.Scatter(
                name=_("Allocated (GPU-hours)"),
                x=[row["day"] for row in days],
                y=[row["allocated_gpu_hours"] for row in days],
                stackgroup="capacity",
                line={"color": "#2563eb"},
            ),
            go.Scatter(
                name=_("Idle (GPU-hours)"),
                x=[row["day"] for row in days],
                y=[row["idle_gpu_hours"] for row in days],
                stackgroup="capacity",
                line={"color": "#94a3b8"},
            ),
            go.Bar(
                name=_("Idle while a project waited on quota"),
                x=[row["day"] for row in days],
                y=[row["idle_while_quota_waiting_gpu_hours"] for row in days],
                marker_color="#dc2626",
            ),
        ],
        layout=figure_layout(y_title=_("GPU-hours per day"), height=380),
    )
    annotate_timeline(idle, metrics["timeline"])
    return idle


def _preemptions(metrics: dict[str, Any]) -> go.Figure:
    """GPU-hours lost to preemption by tier and class, each bar's count above it."""
    names = tier_names(metrics)
    rows = metrics["preemptions"]["by_tier_class"]
    return go.Figure(
        data=[
            go.Bar(
                name=_("GPU-hours lost"),
                x=[
                    f"{names.get(row['tier'], row['tier'] or '–')} · {class_label(row)}"
                    for row in rows
                ],
                y=[row["gpu_hours_lost"] for row in rows],
                marker_color="#dc2626",
                text=[row["count"] for row in rows],
                # The count above its bar, upright, whatever the bar's size.
                textposition="outside",
                textangle=0,
                cliponaxis=False,
                hovertemplate="%{x}: %{y} GPU-h (%{text})<extra></extra>",
            )
        ],
        layout=figure_layout(y_title=_("GPU-hours lost")),
    )


def _exceptions(metrics: dict[str, Any], project: str | None) -> go.Figure:
    """Exceptions requested, approved and rejected by project, under the policy's limit."""
    totals: dict[str, dict[str, float]] = {}
    for row in metrics["exceptions"]["by_project_kind"]:
        if not _mine(row, project):
            continue
        total = totals.setdefault(row["name"], {"requested": 0, "approved": 0, "rejected": 0})
        for key in total:
            total[key] += row[key]
    exceptions = go.Figure(
        data=[
            go.Bar(name=label, x=list(totals), y=[t[key] for t in totals.values()], marker_color=c)
            for key, label, c in (
                ("requested", _("Requested"), "#64748b"),
                ("approved", _("Approved"), "#059669"),
                ("rejected", _("Rejected"), "#dc2626"),
            )
        ],
        layout=figure_layout(y_title=_("Exceptions"), barmode="group"),
    )
    limit = metrics["exceptions"]["policy_monthly_limit"]
    # Counts: whole-number ticks (never 0.2 of an exception).
    highest = max([limit or 0, *(max(t.values()) for t in totals.values())], default=0)
    exceptions.update_yaxes(dtick=max(1, math.ceil(highest / 5)), tickformat=",d")
    if limit is not None:
        exceptions.add_hline(
            y=limit,
            line={"color": "#7c3aed", "dash": "dot"},
            annotation_text=_("Policy: %(limit)s a month") % {"limit": limit},
        )
    return exceptions


def _whole(value: float | None) -> str:
    return "–" if value is None else f"{value:g}"
