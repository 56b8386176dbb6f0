"""A rule change's replay, shown: the monthly review's figures "in force" and "with the
change" side by side per tier and project, each delta marked better or worse, and the
review's charts (``stored_reviews.figure_layout``/``figure_json``) of both.

The waits are the review's own: each replayed job's first wait is a row in
``WorkloadWait``'s columns (``queues.models.ReplayWait``, per run and side), read by the
review's wait queries (``review.waits.wait_queries``, the table swapped for the run's rows)
and shown by the review's table builder (``stored_reviews``' wait columns and rows): a wait
figure added to the review appears here too. The service, preemption and idle figures are
those ``queues.replay.results`` stores (the replay's integrals under the review's names);
the verdicts are ``queues.replay.results.delta``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import plotly.graph_objects as go
from django.utils.translation import gettext as _

from governance.models import RuleChange
from queues.models import ChangeReplay, ReplaySide, ReplayStatus, ReplayWait
from queues.replay.results import delta
from queues.selectors import change_replay_latest
from queues.services.replay import RESULT_FORMAT

from .review._common import Names, Scope, tables
from .review.waits import wait_queries, waits_from_rows
from .stored_reviews import PALETTE, figure_json, figure_layout, wait_columns, wait_row


def replay_waits(*, run: ChangeReplay, side: str, names: Names | None = None) -> dict[str, Any]:
    """The review's waits (``review_metrics``' ``waits``: overall, by tier, project, pool,
    flavor, category and day) of one side of a finished run, by the review's own queries
    over the run's ``ReplayWait`` rows."""
    result = run.result or {}
    start = datetime.fromisoformat(result["start"])
    end = datetime.fromisoformat(result["end"])
    # A replay observes to its window's end: no wait is cut short by its source (censored).
    columns = (
        "submitted_at, day, project_id, tier_id, flavor_id, pool_id, category, wait_end, "
        "started, FALSE AS censored"
    )
    if side not in ReplaySide.values:
        raise ValueError(f"Unknown side {side!r}.")
    t = tables()
    # Only ints and a checked choice are written into the SQL.
    t["wait"] = (
        f"(SELECT {columns} FROM {ReplayWait._meta.db_table} "
        f"WHERE replay_id = {int(run.pk)} AND side = '{side}') AS replayed_"
    )
    scope = Scope(start=start, end=end, pool=None, project=None)
    names = names or Names.load()
    rows = [row for query in wait_queries(scope, t, names) for row in query()]
    waits, _per_project = waits_from_rows(rows, names, False)
    return waits


# The figures the replay has of its own (``queues.replay.results``) beside the review's waits.
def _labels() -> dict[str, str]:
    return {
        "gpu_hours": _("GPU-hours received"),
        "share": _("Share of service"),
        "guarantee_share": _("Share guaranteed"),
        "borrowed_gpu_hours": _("Borrowed GPU-hours"),
        "preemptions": _("Preemptions"),
        "gpu_hours_lost": _("GPU-hours lost"),
        "idle_gpu_hours": _("Idle GPU-hours"),
    }


TIER_FIGURES = ("preemptions", "gpu_hours_lost")
PROJECT_FIGURES = (*TIER_FIGURES, "gpu_hours", "share", "guarantee_share", "borrowed_gpu_hours")
OVERALL_FIGURES = (*TIER_FIGURES, "gpu_hours", "borrowed_gpu_hours", "idle_gpu_hours")


def _shown(key: str, value: Any) -> Any:
    if value is None:
        return None
    if key in ("share", "guarantee_share"):
        return round(float(value) * 100, 1)
    return value


@dataclass
class Cell:
    key: str
    label: str
    before: Any
    after: Any
    change: Any
    verdict: str


@dataclass
class Group:
    slug: str
    name: str
    cells: list[Cell] = field(default_factory=list)


def _wait_cells(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[Cell]:
    """The review's wait columns of one row (its table builder's labels, values and units),
    before and after: every wait figure is a wait or a count of jobs that waited, so lower is
    better; the number of jobs is neutral."""
    labels = [label for label, _numeric in wait_columns("")][1:]
    b_row = wait_row(before, "")[1:] if before else [None] * len(labels)
    a_row = wait_row(after, "")[1:] if after else [None] * len(labels)
    cells = []
    for index, (label, b, a) in enumerate(zip(labels, b_row, a_row, strict=True)):
        key = "jobs" if index == 0 else f"wait_{index}"
        d = delta("wait" if index else "jobs", b, a)
        cells.append(
            Cell(key=key, label=label, before=b, after=a, change=d["value"], verdict=d["verdict"])
        )
    return cells


def _group(
    slug: str,
    name: str,
    waits: tuple[dict[str, Any] | None, dict[str, Any] | None],
    before: dict[str, Any],
    after: dict[str, Any],
    keys: tuple[str, ...],
) -> Group:
    labels = _labels()
    group = Group(slug=slug, name=name, cells=_wait_cells(*waits))
    for key in keys:
        b, a = _shown(key, before.get(key)), _shown(key, after.get(key))
        d = delta(key, b, a)
        group.cells.append(
            Cell(
                key=key,
                label=labels[key],
                before=b,
                after=a,
                change=d["value"],
                verdict=d["verdict"],
            )
        )
    return group


@dataclass
class ReplayPage:
    run: ChangeReplay | None
    overall: list[Group] = field(default_factory=list)
    tiers: list[Group] = field(default_factory=list)
    projects: list[Group] = field(default_factory=list)
    figures: dict[str, dict] = field(default_factory=dict)
    # Stored in an older format, without the rows the review's wait queries read.
    outdated: bool = False
    # The review's waits of each side (``replay_waits``), for the API.
    waits: dict[str, dict[str, Any]] = field(default_factory=dict)


def change_replay_page(*, change: RuleChange) -> ReplayPage:
    """The latest replay of ``change``, shaped for its page (the review's wait queries over
    each side's rows, and a handful of queries more, when done)."""
    run = change_replay_latest(change=change)
    if run is None or run.status != ReplayStatus.DONE or not run.result:
        return ReplayPage(run=run)
    if run.result.get("format") != RESULT_FORMAT:  # made before its waits were stored as rows
        return ReplayPage(run=run, outdated=True)
    result = run.result
    before, after = result["in_force"], result["with_change"]
    names = Names.load()
    waits = {side: replay_waits(run=run, side=side, names=names) for side in ReplaySide.values}
    in_force, with_change = waits[ReplaySide.IN_FORCE], waits[ReplaySide.WITH_CHANGE]

    def by(rows: list[dict[str, Any]], key: str) -> dict[Any, dict[str, Any]]:
        return {row[key]: row for row in rows}

    # Highest tier first (a JSON column need not keep the stored order of keys).
    tier_rows = sorted(
        (tier for tier in names.tiers.values() if tier is not None),
        key=lambda tier: (-tier.score, tier.slug),
    )
    tier_names = {tier.slug: tier.name for tier in tier_rows}
    rank = {slug: index for index, slug in enumerate(tier_names)}
    project_names = {p.slug: p.name for p in names.projects.values() if p is not None}
    empty: dict[str, Any] = {}
    tier_waits = (by(in_force["by_tier"], "tier"), by(with_change["by_tier"], "tier"))
    tier_slugs = set(before["tiers"]) | set(after["tiers"]) | set(tier_waits[0])
    tiers = [
        _group(
            slug,
            tier_names.get(slug, slug or "–"),
            (tier_waits[0].get(slug), tier_waits[1].get(slug)),
            before["tiers"].get(slug, empty),
            after["tiers"].get(slug, empty),
            TIER_FIGURES,
        )
        for slug in sorted(
            (slug for slug in tier_slugs | set(tier_waits[1]) if slug is not None),
            key=lambda slug: (rank.get(slug, 99), slug),
        )
    ]
    project_waits = (
        by(in_force["by_project"], "project"),
        by(with_change["by_project"], "project"),
    )
    project_slugs = set(before["projects"]) | set(after["projects"]) | set(project_waits[0])
    projects = [
        _group(
            slug,
            project_names.get(slug, slug),
            (project_waits[0].get(slug), project_waits[1].get(slug)),
            before["projects"].get(slug, empty),
            after["projects"].get(slug, empty),
            PROJECT_FIGURES,
        )
        for slug in sorted(
            (slug for slug in project_slugs | set(project_waits[1]) if slug),
            key=lambda slug: (project_names.get(slug, slug), slug),
        )
    ]
    overall = _group(
        "",
        _("All jobs"),
        (in_force["overall"], with_change["overall"]),
        before["all"],
        after["all"],
        OVERALL_FIGURES,
    )
    page = ReplayPage(run=run, overall=[overall], tiers=tiers, projects=projects, waits=waits)
    page.figures = replay_figures(page)
    return page


def _side_by_side(
    groups: list[Group], key: str, y_title: str, *, horizontal: bool = False
) -> dict[str, Any]:
    """Bars of one figure (a cell's key, or a wait column's label) per group, both sides."""
    names = [group.name for group in groups]
    values = {
        side: [
            next(c for c in group.cells if key in (c.key, c.label)).__dict__[side]
            for group in groups
        ]
        for side in ("before", "after")
    }
    bars = []
    for index, (side, label) in enumerate(
        (("before", _("In force")), ("after", _("With the change")))
    ):
        options: dict[str, Any] = {"name": label, "marker_color": PALETTE[index * 2]}
        if horizontal:
            bars.append(go.Bar(y=names, x=values[side], orientation="h", **options))
        else:
            bars.append(go.Bar(x=names, y=values[side], **options))
    layout = figure_layout(
        y_title="" if horizontal else y_title,
        height=max(300, 110 + 40 * len(names)) if horizontal else 340,
        barmode="group",
    )
    if horizontal:
        layout.update(
            xaxis={"title": {"text": y_title}, "gridcolor": "#e2e8f0"},
            yaxis={"autorange": "reversed", "automargin": True},
        )
    return figure_json(go.Figure(data=bars, layout=layout))


def replay_figures(page: ReplayPage) -> dict[str, dict]:
    """The review's charts of both replays, side by side: p90 wait per tier, GPU-hours lost
    per tier, p90 wait per project, GPU-hours received per project."""
    return {
        "waits": _side_by_side(page.tiers, _("p90 wait (min)"), _("p90 wait (minutes)")),
        "lost": _side_by_side(page.tiers, "gpu_hours_lost", _("GPU-hours lost")),
        "project_waits": _side_by_side(
            page.projects, _("p90 wait (min)"), _("p90 wait (minutes)"), horizontal=True
        ),
        "service": _side_by_side(
            page.projects, "gpu_hours", _("GPU-hours received"), horizontal=True
        ),
    }
