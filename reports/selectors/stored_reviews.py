"""Reads of stored reviews: the scoped getter, the list, and everything the pages show of a
review — its tables (also the CSV downloads), its plotly figures and the comparison of two.

Everything here reads the review's frozen JSON, never the live evidence: a built review shows
the same numbers however much evidence arrives later.
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import plotly.graph_objects as go
from django.core.exceptions import PermissionDenied
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.http import Http404
from django.urls import NoReverseMatch, reverse
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from governance.models import GrantKind, Membership, ProjectRole
from queues.models import WaitCategory
from reports.models import MonthlyReview, ReviewStatus
from reports.selectors.findings import finding_text, finding_title

# ---------------------------------------------------------------------------- access


def user_can_read_reviews(user: Any) -> bool:
    """Ops read every review; a project's lead reads their project's view of it."""
    return bool(getattr(user, "is_ops", False))


def led_project_slugs(*, user: Any) -> set[str]:
    return set(
        Membership.objects.filter(user=user, role=ProjectRole.LEAD).values_list(
            "project__slug", flat=True
        )
    )


def review_get(*, user: Any, pk: int, project: str | None = None) -> MonthlyReview:
    """The one getter of a review: 404 when there is none (or, for a project's view, when
    the review has nothing on the project), 403 when ``user`` may not read it. The whole
    review is for ops; a project's view for ops and the project's leads."""
    review = MonthlyReview.objects.select_related("requested_by").filter(pk=pk).first()
    if review is None:
        raise Http404(_("No such review."))
    if project is None:
        if not user_can_read_reviews(user):
            raise PermissionDenied(_("Only ops read the whole review."))
        return review
    if not (user_can_read_reviews(user) or project in led_project_slugs(user=user)):
        raise PermissionDenied(_("Only ops and the project's leads read its review."))
    if review.is_built and project not in review.project_metrics:
        raise Http404(_("The review has nothing on this project."))
    return review


def review_list(*, user: Any) -> QuerySet[MonthlyReview]:
    """Ops: every review; a lead: the built site-wide reviews (their projects' views)."""
    reviews = MonthlyReview.objects.select_related("requested_by").defer(
        "metrics", "project_metrics", "findings"
    )
    if user_can_read_reviews(user):
        return reviews
    if not led_project_slugs(user=user):
        raise PermissionDenied(_("Only ops and project leads read the reviews."))
    return reviews.filter(status=ReviewStatus.DONE, pool="", project="")


def review_project_links(
    *, led: Iterable[str], reviews: Iterable[MonthlyReview]
) -> dict[int, list[str]]:
    """For each built review of ``reviews``, the project views a lead of the projects ``led``
    (``led_project_slugs``) may open from the list: those the review has numbers on
    (``review_get`` answers 404 for the others). One query for the page, whatever its length."""
    slugs = sorted(led)
    built = [review.pk for review in reviews if review.is_built]
    if not slugs or not built:
        return {}
    has = {
        f"has_{i}_": ExpressionWrapper(
            Q(project_metrics__has_key=slug), output_field=BooleanField()
        )
        for i, slug in enumerate(slugs)
    }
    links: dict[int, list[str]] = {}
    for row in MonthlyReview.objects.filter(pk__in=built).annotate(**has).values("pk", *has):
        links[row["pk"]] = [slug for i, slug in enumerate(slugs) if row[f"has_{i}_"]]
    return links


def latest_review() -> MonthlyReview | None:
    """The newest built site-wide review (the home page links to it)."""
    return (
        MonthlyReview.objects.filter(status=ReviewStatus.DONE, pool="", project="")
        .only("pk", "start", "end", "version", "built_at")
        .order_by("-start", "-version")
        .first()
    )


def review_projects(*, metrics: dict[str, Any]) -> list[tuple[str, str]]:
    """(slug, name) of every project the review has numbers on, by name."""
    names = {}
    for row in metrics["service"]["by_project"] + metrics["waits"]["by_project"]:
        if row.get("project"):
            names[row["project"]] = row["name"]
    return sorted(names.items(), key=lambda item: item[1])


def review_versions(*, review: MonthlyReview) -> list[MonthlyReview]:
    return list(
        MonthlyReview.objects.filter(
            start=review.start, end=review.end, pool=review.pool, project=review.project
        )
        .only("pk", "version", "status", "built_at")
        .order_by("version")
    )


def review_choices() -> list[MonthlyReview]:
    """The built reviews one may compare with (newest first)."""
    return list(
        MonthlyReview.objects.filter(status=ReviewStatus.DONE)
        .only("pk", "start", "end", "pool", "project", "version")
        .order_by("-start", "-version")
    )


# ---------------------------------------------------------------------------- tables


def _minutes(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds / 60, 1)


def _percent(share: float | None) -> float | None:
    return None if share is None else round(share * 100, 1)


def _name(row: dict[str, Any], key: str) -> str:
    return row.get("name") or row.get(key) or _("None")


@dataclass
class Table:
    key: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    numeric: list[bool]


def _table(key: str, title: str, columns: list[tuple[str, bool]], rows: list[list[Any]]) -> Table:
    return Table(
        key=key,
        title=title,
        columns=[label for label, _numeric in columns],
        rows=rows,
        numeric=[numeric for _label, numeric in columns],
    )


def _wait_columns(first: str) -> list[tuple[str, bool]]:
    return [
        (first, False),
        (_("Jobs"), True),
        (_("Still waiting at the end"), True),
        (_("p50 wait (min)"), True),
        (_("p90 wait (min)"), True),
        (_("p99 wait (min)"), True),
        (_("Longest wait (min)"), True),
        (_("Over the threshold"), True),
    ]


def _wait_row(row: dict[str, Any], label: str) -> list[Any]:
    return [
        label,
        row["jobs"],
        row["waiting_at_end"],
        _minutes(row["p50"]),
        _minutes(row["p90"]),
        _minutes(row["p99"]),
        _minutes(row["max"]),
        row["over_threshold"],
    ]


def review_tables(*, metrics: dict[str, Any], project: str | None = None) -> dict[str, Table]:
    """The review's numbers as tables, keyed like its figures (also the CSV files). With
    ``project``, only that project's rows of the per-project tables."""

    def mine(row: dict[str, Any]) -> bool:
        return project is None or row.get("project") == project

    waits = metrics["waits"]
    tables = [
        _table(
            "waits_by_tier",
            _("Waits by tier"),
            [*_wait_columns(_("Tier")), (_("Threshold (min)"), True)],
            [
                [*_wait_row(row, _name(row, "tier")), _minutes(row.get("threshold_seconds"))]
                for row in waits["by_tier"]
            ],
        ),
        _table(
            "waits_daily",
            _("Wait percentiles by tier and day"),
            [
                (_("Day"), False),
                (_("Tier"), False),
                (_("Jobs"), True),
                (_("p50 wait (min)"), True),
                (_("p90 wait (min)"), True),
                (_("p99 wait (min)"), True),
            ],
            [
                [
                    row["day"],
                    _tier_names(metrics).get(row["tier"], row["tier"] or _("None")),
                    row["jobs"],
                    _minutes(row["p50"]),
                    _minutes(row["p90"]),
                    _minutes(row["p99"]),
                ]
                for row in waits["daily_by_tier"]
            ],
        ),
        _table(
            "waits_by_project",
            _("Waits by project"),
            _wait_columns(_("Project")),
            [_wait_row(row, _name(row, "project")) for row in waits["by_project"] if mine(row)],
        ),
        _table(
            "waits_by_category",
            _("Waits by category"),
            [(_("Category"), False), (_("Jobs"), True), (_("Waiting (hours)"), True)],
            [
                [_category_label(row), row["jobs"], round(row["wait_seconds"] / 3600, 2)]
                for row in waits["by_category"]
            ],
        ),
        _table(
            "service",
            _("Service against guarantee"),
            [
                (_("Project"), False),
                (_("Pool"), False),
                (_("GPU-hours received"), True),
                (_("Share of the pool (%)"), True),
                (_("Guarantee share (%)"), True),
                (_("GPU-hours guaranteed"), True),
                (_("Used within the guarantee"), True),
                (_("Hours waiting on quota"), True),
            ],
            [
                [
                    row["name"],
                    row["pool"] or "",
                    row["gpu_hours"],
                    _percent(row["share"]),
                    _percent(row["guarantee_share"]),
                    row["guaranteed_gpu_hours"],
                    row["within_guarantee_gpu_hours"],
                    row["quota_wait_hours"],
                ]
                for row in metrics["service"]["by_project"]
                if mine(row)
            ],
        ),
        _table(
            "lending",
            _("Borrowing and lending"),
            [
                (_("Project"), False),
                (_("Pool"), False),
                (_("Borrowed (GPU-hours)"), True),
                (_("Lent (GPU-hours)"), True),
            ],
            [
                [row["name"], row["pool"] or "", row["borrowed_gpu_hours"], row["lent_gpu_hours"]]
                for row in metrics["service"]["by_project"]
                if mine(row)
            ],
        ),
        _table(
            "idle",
            _("Idle capacity while others waited"),
            [
                (_("Day"), False),
                (_("Available (GPU-hours)"), True),
                (_("Allocated (GPU-hours)"), True),
                (_("Idle (GPU-hours)"), True),
                (_("Idle while a project waited on quota"), True),
            ],
            [
                [
                    row["day"],
                    row["available_gpu_hours"],
                    row["allocated_gpu_hours"],
                    row["idle_gpu_hours"],
                    row["idle_while_quota_waiting_gpu_hours"],
                ]
                for row in metrics["capacity"]["daily"]
            ],
        ),
        _table(
            "preemptions",
            _("Preemption losses"),
            [
                (_("Tier"), False),
                (_("Preemption class"), False),
                (_("Preemptions"), True),
                (_("GPU-hours lost"), True),
                (_("Median time to restart (min)"), True),
            ],
            [
                [
                    _tier_names(metrics).get(row["tier"], row["tier"] or _("None")),
                    row["preemption_class"] or _("None"),
                    row["count"],
                    row["gpu_hours_lost"],
                    _minutes(row["restart_p50_seconds"]),
                ]
                for row in metrics["preemptions"]["by_tier_class"]
            ],
        ),
        _table(
            "exceptions",
            _("Exceptions"),
            [
                (_("Project"), False),
                (_("Kind"), False),
                (_("Requested"), True),
                (_("Approved"), True),
                (_("Rejected"), True),
                (_("GPU-hours"), True),
            ],
            [
                [
                    row["name"],
                    _kind_label(row["kind"]),
                    row["requested"],
                    row["approved"],
                    row["rejected"],
                    row["gpu_hours"],
                ]
                for row in metrics["exceptions"]["by_project_kind"]
                if mine(row)
            ],
        ),
        _table(
            "timeline",
            _("Rule changes and grants"),
            [(_("When"), False), (_("What"), False), (_("Title"), False), (_("Object"), False)],
            [
                [row["at"], _timeline_kind(row["kind"]), row["title"], row["object"]]
                for row in metrics["timeline"]
            ],
        ),
    ]
    return {table.key: table for table in tables}


def _category_label(row: dict[str, Any]) -> str:
    """The wait category in the reader's language (the stored label is the builder's)."""
    labels = dict(WaitCategory.choices)
    return str(labels.get(row["category"], row.get("label") or row["category"]))


def _kind_label(kind: str) -> str:
    return str(dict(GrantKind.choices).get(kind, kind))


def _tier_names(metrics: dict[str, Any]) -> dict[Any, str]:
    return {row["tier"]: row["name"] for row in metrics["waits"]["by_tier"]}


def _timeline_kind(kind: str) -> str:
    return _("Rule change") if kind == "change" else _("Grant")


def review_csv_rows(*, review: MonthlyReview, project: str | None = None) -> list[list[Any]]:
    """The whole review as one CSV: a section column, then each table's header and rows."""
    metrics = review.project_metrics[project] if project else review.metrics
    rows: list[list[Any]] = [
        [_("Review"), str(review), review.start.isoformat(), review.end.isoformat()]
    ]
    for table in review_tables(metrics=metrics, project=project).values():
        rows.append([])
        rows.append([table.title, *table.columns])
        rows.extend([table.key, *row] for row in table.rows)
    rows.append([])
    rows.append([_("Findings"), _("Kind"), _("Finding")])
    for finding in review_findings_shown(review=review, project=project):
        rows.append(["findings", finding["title"], finding["text"]])
    return rows


# ---------------------------------------------------------------------------- findings


def _url(name: str, args: list[Any]) -> str | None:
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


def review_findings_shown(
    *, review: MonthlyReview, project: str | None = None, can_edit_rules: bool = True
) -> list[dict[str, Any]]:
    """The frozen findings in words, with their links (only ``project``'s when given). Ops
    propose a rule change on the rule's edit page; a lead (``can_edit_rules`` false) asks for
    one with a request for the project."""
    shown = []
    for finding in review.findings:
        if project is not None and finding.get("project") != project:
            continue
        evidence = finding["evidence"]
        if evidence["url"] == "report_detail":
            # The section of the dashboard (of the project's view, which shows lending with
            # its service) that holds the numbers.
            anchor = evidence["anchor"]
            if project is None:
                evidence_url = reverse("report_detail", args=[review.pk]) + f"#{anchor}"
            else:
                evidence_url = "#" + ("service" if anchor == "lending" else anchor)
        else:
            evidence_url = _url(evidence["url"], evidence["args"]) or ""
        propose = finding.get("propose")
        if propose and not can_edit_rules:
            slug = finding.get("project") or project
            propose = None
            if slug:
                propose = {"url": "request_create", "args": [], "query": f"?project={slug}"}
        shown.append(
            {
                "kind": finding["kind"],
                "title": finding_title(finding),
                "text": finding_text(finding),
                "evidence_url": evidence_url,
                "propose_url": (
                    (_url(propose["url"], propose["args"]) or "") + propose.get("query", "")
                    if propose
                    else None
                ),
            }
        )
    return shown


# ---------------------------------------------------------------------------- figures

_FONT = {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 13}
_PALETTE = ["#2563eb", "#0d9488", "#d97706", "#7c3aed", "#dc2626", "#64748b", "#059669"]


def _layout(*, y_title: str, height: int = 340, **extra: Any) -> go.Layout:
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


def _annotate(figure: go.Figure, timeline: list[dict[str, Any]]) -> None:
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
            hovertext=f"{_timeline_kind(item['kind'])}: {item['title']} ({item['object']})",
            font={"size": 10, "color": "#475569"},
        )


def _has_data(figure: go.Figure) -> bool:
    for trace in figure.data:
        for axis in ("y", "x", "values"):
            values = getattr(trace, axis, None)
            if values is not None and len(values):
                return True
    return False


def _as_json(figure: go.Figure) -> dict[str, Any]:
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


# The figure style, shared by every figure of the reports (the replay's too).
PALETTE = _PALETTE
figure_layout = _layout
figure_json = _as_json


def review_figures(*, metrics: dict[str, Any], project: str | None = None) -> dict[str, dict]:
    """The review's plotly figures as JSON data (for ``json_script``), keyed like its tables."""

    def mine(row: dict[str, Any]) -> bool:
        return project is None or row.get("project") == project

    names = _tier_names(metrics)
    timeline = metrics["timeline"]
    figures: dict[str, dict] = {}

    waits = go.Figure(layout=_layout(y_title=_("p90 wait (minutes)"), height=380))
    tiers: dict[Any, list[dict[str, Any]]] = {}
    for row in metrics["waits"]["daily_by_tier"]:
        tiers.setdefault(row["tier"], []).append(row)
    for index, (tier, rows) in enumerate(tiers.items()):
        color = _PALETTE[index % len(_PALETTE)]
        label = names.get(tier, tier or _("None"))
        waits.add_trace(
            go.Scatter(
                x=[row["day"] for row in rows],
                y=[_minutes(row["p90"]) for row in rows],
                mode="lines+markers",
                name=_("%(tier)s p90") % {"tier": label},
                line={"color": color},
            )
        )
        waits.add_trace(
            go.Scatter(
                x=[row["day"] for row in rows],
                y=[_minutes(row["p50"]) for row in rows],
                mode="lines",
                name=_("%(tier)s p50") % {"tier": label},
                line={"color": color, "dash": "dash", "width": 1},
            )
        )
    _annotate(waits, timeline)
    figures["waits_daily"] = _as_json(waits)

    service_rows = [row for row in metrics["service"]["by_project"] if mine(row)]
    labels = [f"{row['name']} · {row['pool'] or '–'}" for row in service_rows]

    # Horizontal bars: project names stay readable however many there are.
    def height_for(bars_per_row: int) -> int:
        return max(240, 110 + (12 * bars_per_row + 14) * len(labels))

    def bars(name: str, values: list[float], color: str) -> go.Bar:
        return go.Bar(name=name, y=labels, x=values, orientation="h", marker_color=color)

    def by_project_layout(x_title: str, barmode: str, bars_per_row: int) -> go.Layout:
        layout = _layout(y_title="", height=height_for(bars_per_row), barmode=barmode)
        layout.update(
            xaxis={"title": {"text": x_title}, "gridcolor": "#e2e8f0"},
            yaxis={"autorange": "reversed", "automargin": True, "dtick": 1},
            legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"},
            margin={"l": 16, "r": 16, "t": 40, "b": 48},
        )
        return layout

    service = go.Figure(
        data=[
            bars(_("GPU-hours received"), [r["gpu_hours"] for r in service_rows], "#2563eb"),
            bars(
                _("GPU-hours guaranteed"),
                [r["guaranteed_gpu_hours"] for r in service_rows],
                "#94a3b8",
            ),
            bars(
                _("Used within the guarantee"),
                [r["within_guarantee_gpu_hours"] for r in service_rows],
                "#0d9488",
            ),
        ],
        layout=by_project_layout(_("GPU-hours"), "group", 3),
    )
    figures["service"] = _as_json(service)

    lending = go.Figure(
        data=[
            bars(
                _("Borrowed (GPU-hours)"),
                [r["borrowed_gpu_hours"] for r in service_rows],
                "#d97706",
            ),
            bars(_("Lent (GPU-hours)"), [-r["lent_gpu_hours"] for r in service_rows], "#0d9488"),
        ],
        layout=by_project_layout(_("GPU-hours (lent below zero)"), "relative", 1),
    )
    figures["lending"] = _as_json(lending)

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
        layout=_layout(y_title=_("GPU-hours per day"), height=380),
    )
    _annotate(idle, timeline)
    figures["idle"] = _as_json(idle)

    preemption_rows = metrics["preemptions"]["by_tier_class"]
    preemptions = go.Figure(
        data=[
            go.Bar(
                name=_("GPU-hours lost"),
                x=[
                    f"{names.get(row['tier'], row['tier'] or '–')} · "
                    f"{row['preemption_class'] or '–'}"
                    for row in preemption_rows
                ],
                y=[row["gpu_hours_lost"] for row in preemption_rows],
                marker_color="#dc2626",
                text=[row["count"] for row in preemption_rows],
                hovertemplate="%{x}: %{y} GPU-h (%{text})<extra></extra>",
            )
        ],
        layout=_layout(y_title=_("GPU-hours lost")),
    )
    figures["preemptions"] = _as_json(preemptions)

    totals: dict[str, dict[str, float]] = {}
    for row in metrics["exceptions"]["by_project_kind"]:
        if not mine(row):
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
        layout=_layout(y_title=_("Exceptions"), barmode="group"),
    )
    limit = metrics["exceptions"]["policy_monthly_limit"]
    if limit is not None:
        exceptions.add_hline(
            y=limit,
            line={"color": "#7c3aed", "dash": "dot"},
            annotation_text=_("Policy: %(limit)s a month") % {"limit": limit},
        )
    figures["exceptions"] = _as_json(exceptions)
    return figures


# ---------------------------------------------------------------------------- compare


@dataclass
class Delta:
    label: str
    a: float | int | None
    b: float | int | None
    # +1: B is higher, -1: lower, 0: the same. ``worse`` when the change is bad news.
    direction: int
    worse: bool | None

    @property
    def delta(self) -> float | None:
        if self.a is None or self.b is None:
            return None
        return round(self.b - self.a, 2)


def _delta(label: str, a: Any, b: Any, *, higher_is_worse: bool | None) -> Delta:
    direction = 0
    if a is not None and b is not None and a != b:
        direction = 1 if b > a else -1
    worse = None
    if direction and higher_is_worse is not None:
        worse = (direction > 0) == higher_is_worse
    return Delta(label=label, a=a, b=b, direction=direction, worse=worse)


def review_compare(*, a: MonthlyReview, b: MonthlyReview) -> list[tuple[str, list[Delta]]]:
    """Two built reviews side by side: per section, the figures of A, of B, and B − A."""
    ma, mb = a.metrics, b.metrics
    sections: list[tuple[str, list[Delta]]] = []

    overall = [
        _delta(
            _("Jobs"),
            ma["waits"]["overall"]["jobs"],
            mb["waits"]["overall"]["jobs"],
            higher_is_worse=None,
        ),
    ]
    for key, label in (
        ("waiting_at_end", _("Still waiting at the end")),
        ("p50", _("p50 wait (min)")),
        ("p90", _("p90 wait (min)")),
        ("p99", _("p99 wait (min)")),
        ("max", _("Longest wait (min)")),
        ("over_threshold", _("Over the threshold")),
    ):
        va, vb = ma["waits"]["overall"][key], mb["waits"]["overall"][key]
        if key in ("p50", "p90", "p99", "max"):
            va, vb = _minutes(va), _minutes(vb)
        overall.append(_delta(label, va, vb, higher_is_worse=True))
    sections.append((_("Waits, all jobs"), overall))

    tiers_a = {row["tier"]: row for row in ma["waits"]["by_tier"]}
    tier_rows = []
    for row in mb["waits"]["by_tier"]:
        other = tiers_a.get(row["tier"], {})
        tier_rows.append(
            _delta(
                _("%(tier)s: p90 wait (min)") % {"tier": _name(row, "tier")},
                _minutes(other.get("p90")),
                _minutes(row["p90"]),
                higher_is_worse=True,
            )
        )
        tier_rows.append(
            _delta(
                _("%(tier)s: over the threshold") % {"tier": _name(row, "tier")},
                other.get("over_threshold"),
                row["over_threshold"],
                higher_is_worse=True,
            )
        )
    sections.append((_("Waits by tier"), tier_rows))

    cap_a, cap_b = ma["capacity"]["total"], mb["capacity"]["total"]
    sections.append(
        (
            _("Capacity"),
            [
                _delta(
                    _("Available (GPU-hours)"),
                    cap_a["available_gpu_hours"],
                    cap_b["available_gpu_hours"],
                    higher_is_worse=None,
                ),
                _delta(
                    _("Allocated (GPU-hours)"),
                    cap_a["allocated_gpu_hours"],
                    cap_b["allocated_gpu_hours"],
                    higher_is_worse=False,
                ),
                _delta(
                    _("Idle (GPU-hours)"),
                    cap_a["idle_gpu_hours"],
                    cap_b["idle_gpu_hours"],
                    higher_is_worse=True,
                ),
                _delta(
                    _("Idle while a project waited on quota"),
                    cap_a["idle_while_quota_waiting_gpu_hours"],
                    cap_b["idle_while_quota_waiting_gpu_hours"],
                    higher_is_worse=True,
                ),
            ],
        )
    )

    service_a = {(r["project"], r["pool"]): r for r in ma["service"]["by_project"]}
    service_rows = []
    for row in mb["service"]["by_project"]:
        other = service_a.get((row["project"], row["pool"]), {})
        service_rows.append(
            _delta(
                f"{row['name']} · {row['pool'] or '–'}: " + _("GPU-hours received"),
                other.get("gpu_hours"),
                row["gpu_hours"],
                higher_is_worse=None,
            )
        )
    sections.append((_("Service"), service_rows))

    pre_a, pre_b = ma["preemptions"]["total"], mb["preemptions"]["total"]
    exc_a = sum(row["requested"] for row in ma["exceptions"]["by_project_kind"])
    exc_b = sum(row["requested"] for row in mb["exceptions"]["by_project_kind"])
    sections.append(
        (
            _("Preemptions, exceptions and findings"),
            [
                _delta(_("Preemptions"), pre_a["count"], pre_b["count"], higher_is_worse=True),
                _delta(
                    _("GPU-hours lost"),
                    pre_a["gpu_hours_lost"],
                    pre_b["gpu_hours_lost"],
                    higher_is_worse=True,
                ),
                _delta(_("Exceptions requested"), exc_a, exc_b, higher_is_worse=True),
                _delta(_("Findings"), len(a.findings), len(b.findings), higher_is_worse=True),
            ],
        )
    )
    return sections


def window_of(review: MonthlyReview) -> tuple[datetime, datetime]:
    return review.start, review.end
