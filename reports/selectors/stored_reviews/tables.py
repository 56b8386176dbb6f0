"""The review's numbers as tables (the page's tables, the API's and the CSV files)."""

from dataclasses import dataclass
from typing import Any, Protocol

from django.utils.translation import gettext as _

from ._format import (
    category_label,
    class_label,
    day_label,
    kind_label,
    minutes,
    percent,
    row_name,
    tier_names,
    timeline_kind,
    timeline_object,
    timeline_title,
    when_label,
)


@dataclass
class Table:
    key: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    numeric: list[bool]


class _Build(Protocol):
    def __call__(self, metrics: dict[str, Any], *, project: str | None, human: bool) -> Table: ...


def _table(key: str, title: str, columns: list[tuple[str, bool]], rows: list[list[Any]]) -> Table:
    return Table(
        key=key,
        title=title,
        columns=[label for label, _numeric in columns],
        rows=rows,
        numeric=[numeric for _label, numeric in columns],
    )


def wait_columns(first: str, *, both: bool = True) -> list[tuple[str, bool]]:
    """A waits table's columns: every job's figures (never-started and still-waiting jobs
    included), then (``both``) the started jobs' own (``started_columns``), side by side.
    Without ``both`` (the replay, which replays started jobs only): one kind, unqualified."""
    if not both:
        percentiles = [
            (_("p50 wait (min)"), True),
            (_("p90 wait (min)"), True),
            (_("p95 wait (min)"), True),
            (_("p99 wait (min)"), True),
        ]
    else:
        percentiles = [
            (_("p50 wait, all jobs (min)"), True),
            (_("p90 wait, all jobs (min)"), True),
            (_("p95 wait, all jobs (min)"), True),
            (_("p99 wait, all jobs (min)"), True),
        ]
    return [
        (first, False),
        (_("Jobs"), True),
        (_("Never started"), True),
        (_("Still waiting at the end"), True),
        *percentiles,
        (_("Mean wait (min)"), True),
        (_("Longest wait (min)"), True),
        (_("Over the threshold"), True),
        *(started_columns() if both else []),
    ]


def started_columns() -> list[tuple[str, bool]]:
    """The started-only figures' columns: the jobs that started before the window's end."""
    return [
        (_("Started jobs"), True),
        (_("p50 wait, started jobs only (min)"), True),
        (_("p90 wait, started jobs only (min)"), True),
        (_("p95 wait, started jobs only (min)"), True),
        (_("p99 wait, started jobs only (min)"), True),
    ]


def started_cells(
    row: dict[str, Any], *, quantiles: tuple[str, ...] = ("p50", "p90", "p95", "p99")
) -> list[Any]:
    """The started-only cells (none, "–", in a review built before they existed)."""
    started = row.get("started_only") or {}
    return [started.get("jobs"), *(minutes(started.get(key)) for key in quantiles)]


def wait_row(row: dict[str, Any], label: str, *, both: bool = True) -> list[Any]:
    return [
        label,
        row["jobs"],
        # Reviews built before these figures existed have none: "–", never a made-up 0.
        row.get("never_started"),
        row["waiting_at_end"],
        minutes(row["p50"]),
        minutes(row["p90"]),
        minutes(row.get("p95")),
        minutes(row["p99"]),
        minutes(row.get("mean")),
        minutes(row["max"]),
        row["over_threshold"],
        *(started_cells(row) if both else []),
    ]


def review_tables(
    *, metrics: dict[str, Any], project: str | None = None, human: bool = False
) -> dict[str, Table]:
    """The review's numbers as tables, keyed like its figures (also the CSV files). With
    ``project``, only that project's rows of the per-project tables. ``human``: days and
    times as the reader's locale writes them (the pages); otherwise ISO (API, CSV)."""
    tables = [build(metrics, project=project, human=human) for build in _TABLES]
    return {table.key: table for table in tables}


def _mine(row: dict[str, Any], project: str | None) -> bool:
    return project is None or row.get("project") == project


def _waits_by_tier(metrics: dict[str, Any], *, project: str | None, human: bool) -> Table:
    return _table(
        "waits_by_tier",
        _("Waits by tier"),
        [*wait_columns(_("Tier")), (_("Threshold (min)"), True)],
        [
            [*wait_row(row, row_name(row, "tier")), minutes(row.get("threshold_seconds"))]
            for row in metrics["waits"]["by_tier"]
        ],
    )


def _waits_daily(metrics: dict[str, Any], *, project: str | None, human: bool) -> Table:
    return _table(
        "waits_daily",
        _("Wait percentiles by tier and day"),
        [
            (_("Day"), False),
            (_("Tier"), False),
            (_("Jobs"), True),
            (_("p50 wait, all jobs (min)"), True),
            (_("p90 wait, all jobs (min)"), True),
            (_("p99 wait, all jobs (min)"), True),
            (_("Started jobs"), True),
            (_("p50 wait, started jobs only (min)"), True),
            (_("p90 wait, started jobs only (min)"), True),
            (_("p99 wait, started jobs only (min)"), True),
        ],
        [
            [
                day_label(row["day"], human=human),
                tier_names(metrics).get(row["tier"], row["tier"] or _("None")),
                row["jobs"],
                minutes(row["p50"]),
                minutes(row["p90"]),
                minutes(row["p99"]),
                *started_cells(row, quantiles=("p50", "p90", "p99")),
            ]
            for row in metrics["waits"]["daily_by_tier"]
        ],
    )


def _waits_by_project(metrics: dict[str, Any], *, project: str | None, human: bool) -> Table:
    return _table(
        "waits_by_project",
        _("Waits by project"),
        wait_columns(_("Project")),
        [
            wait_row(row, row_name(row, "project"))
            for row in metrics["waits"]["by_project"]
            if _mine(row, project)
        ],
    )


def _waits_by_category(metrics: dict[str, Any], *, project: str | None, human: bool) -> Table:
    return _table(
        "waits_by_category",
        _("Waits by category"),
        [(_("Category"), False), (_("Jobs"), True), (_("Waiting (hours)"), True)],
        [
            [category_label(row), row["jobs"], round(row["wait_seconds"] / 3600, 2)]
            for row in metrics["waits"]["by_category"]
        ],
    )


def _starved_column(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """The service table's last column: the hours waiting for resources below the guarantee
    (what makes a project starved), or, for a review built before it, the column it had (the
    hours waiting on quota below the guarantee; "–" in reviews built before that)."""
    if any("resource_wait_below_guarantee_hours" in row for row in rows):
        return "resource_wait_below_guarantee_hours", _(
            "Hours waiting for resources below the guarantee"
        )
    return "quota_wait_below_guarantee_hours", _("Of which below the guarantee")


def _service(metrics: dict[str, Any], *, project: str | None, human: bool) -> Table:
    rows = metrics["service"]["by_project"]
    starved_key, starved_label = _starved_column(rows)
    return _table(
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
            (starved_label, True),
        ],
        [
            [
                row["name"],
                row["pool"] or "",
                row["gpu_hours"],
                percent(row["share"]),
                percent(row["guarantee_share"]),
                row["guaranteed_gpu_hours"],
                row["within_guarantee_gpu_hours"],
                row["quota_wait_hours"],
                row.get(starved_key),
            ]
            for row in rows
            if _mine(row, project)
        ],
    )


def _lending(metrics: dict[str, Any], *, project: str | None, human: bool) -> Table:
    return _table(
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
            if _mine(row, project)
        ],
    )


def _idle(metrics: dict[str, Any], *, project: str | None, human: bool) -> Table:
    return _table(
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
                day_label(row["day"], human=human),
                row["available_gpu_hours"],
                row["allocated_gpu_hours"],
                row["idle_gpu_hours"],
                row["idle_while_quota_waiting_gpu_hours"],
            ]
            for row in metrics["capacity"]["daily"]
        ],
    )


def _preemptions(metrics: dict[str, Any], *, project: str | None, human: bool) -> Table:
    return _table(
        "preemptions",
        _("Preemption losses"),
        [
            (_("Tier"), False),
            (_("Preemption class"), False),
            (_("Preemptions"), True),
            (_("Before the minimum runtime"), True),
            (_("GPU-hours lost"), True),
            (_("Median time to restart (min)"), True),
        ],
        [
            [
                tier_names(metrics).get(row["tier"], row["tier"] or _("None")),
                class_label(row),
                row["count"],
                row.get("early"),
                row["gpu_hours_lost"],
                minutes(row["restart_p50_seconds"]),
            ]
            for row in metrics["preemptions"]["by_tier_class"]
        ],
    )


def _exceptions(metrics: dict[str, Any], *, project: str | None, human: bool) -> Table:
    return _table(
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
                kind_label(row["kind"]),
                row["requested"],
                row["approved"],
                row["rejected"],
                row["gpu_hours"],
            ]
            for row in metrics["exceptions"]["by_project_kind"]
            if _mine(row, project)
        ],
    )


def _exception_outcomes(metrics: dict[str, Any], *, project: str | None, human: bool) -> Table:
    return _table(
        "exception_outcomes",
        _("What the approved exceptions changed"),
        [
            (_("Project"), False),
            (_("Kind"), False),
            (_("From"), False),
            (_("Until"), False),
            (_("Jobs in its time box"), True),
            (_("Their median wait (min)"), True),
            (_("Tier"), False),
            (_("The tier's median wait (min)"), True),
            (_("Outcome"), False),
        ],
        [
            _outcome_row(row, metrics, human=human)
            for row in metrics["exceptions"].get("outcomes", [])
            if _mine(row, project)
        ],
    )


def _timeline(metrics: dict[str, Any], *, project: str | None, human: bool) -> Table:
    return _table(
        "timeline",
        _("Rule changes and grants"),
        [(_("When"), False), (_("What"), False), (_("Title"), False), (_("Object"), False)],
        [
            [
                when_label(row["at"], human=human),
                timeline_kind(row["kind"]),
                timeline_title(row),
                timeline_object(row),
            ]
            for row in metrics["timeline"]
        ],
    )


def _outcome_row(row: dict[str, Any], metrics: dict[str, Any], *, human: bool) -> list[Any]:
    """An approved exception's jobs against their tier's median wait of the window."""
    tier = next((t for t in metrics["waits"]["by_tier"] if t["tier"] == row["tier"]), None)
    tier_p50 = tier["p50"] if tier else None
    if not row["jobs"] or row["p50"] is None:
        outcome = _("No job of the project was submitted in its time box")
    elif tier_p50 is None:
        outcome = _("Unknown: the tier has no median wait in this window")
    else:
        sooner = minutes(tier_p50 - row["p50"]) or 0.0
        if sooner > 0:
            outcome = _("Started %(minutes)s minutes sooner than the tier's median") % {
                "minutes": f"{sooner:g}"
            }
        elif sooner < 0:
            outcome = _("Started %(minutes)s minutes later than the tier's median") % {
                "minutes": f"{-sooner:g}"
            }
        else:
            outcome = _("Started as soon as the tier's median")
    return [
        row["name"],
        kind_label(row["kind"]),
        when_label(row["starts_at"], human=human),
        when_label(row["ends_at"], human=human),
        row["jobs"],
        minutes(row["p50"]),
        tier["name"] if tier else (row["tier"] or _("None")),
        minutes(tier_p50),
        outcome,
    ]


# The tables in the order the page, the API and the CSV files give them.
_TABLES: tuple[_Build, ...] = (
    _waits_by_tier,
    _waits_daily,
    _waits_by_project,
    _waits_by_category,
    _service,
    _lending,
    _idle,
    _preemptions,
    _exceptions,
    _exception_outcomes,
    _timeline,
)
