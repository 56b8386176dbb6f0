"""A rule change's replay, shown: the monthly review's figures "in force" and "with the
change" side by side per tier and project, each delta marked better or worse, and the
review's charts (``stored_reviews.style.figure_layout``/``figure_json``) of both.

The figures are those ``queues.replay.results`` stores (the review's definitions); the
verdicts are ``queues.replay.results.delta``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go
from django.utils.translation import gettext as _

from governance.models import PriorityTier, Project, RuleChange
from queues.models import ChangeReplay, ReplayStatus
from queues.replay.results import delta
from queues.selectors import change_replay_latest

from .stored_reviews.style import PALETTE, figure_json, figure_layout

# (key, label, unit): minutes for waits, else the stored value.
WAIT_FIGURES = ("p50", "p90", "p99")


def _labels() -> dict[str, str]:
    return {
        "jobs": _("Jobs"),
        "p50": _("Wait p50 (min)"),
        "p90": _("Wait p90 (min)"),
        "p99": _("Wait p99 (min)"),
        "over_threshold": _("Over the wait target"),
        "never_started": _("Never started"),
        "gpu_hours": _("GPU-hours received"),
        "share": _("Share of service"),
        "guarantee_share": _("Share guaranteed"),
        "borrowed_gpu_hours": _("Borrowed GPU-hours"),
        "preemptions": _("Preemptions"),
        "gpu_hours_lost": _("GPU-hours lost"),
        "idle_gpu_hours": _("Idle GPU-hours"),
    }


TIER_FIGURES = (
    "jobs",
    "p50",
    "p90",
    "p99",
    "over_threshold",
    "never_started",
    "preemptions",
    "gpu_hours_lost",
)
PROJECT_FIGURES = (
    *TIER_FIGURES,
    "gpu_hours",
    "share",
    "guarantee_share",
    "borrowed_gpu_hours",
)
OVERALL_FIGURES = (*TIER_FIGURES, "gpu_hours", "borrowed_gpu_hours", "idle_gpu_hours")


def _shown(key: str, value: Any) -> Any:
    if value is None:
        return None
    if key in WAIT_FIGURES:
        return round(float(value) / 60, 1)
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


def _group(
    slug: str, name: str, before: dict[str, Any], after: dict[str, Any], keys: tuple[str, ...]
) -> Group:
    labels = _labels()
    group = Group(slug=slug, name=name)
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


def change_replay_page(*, change: RuleChange) -> ReplayPage:
    """The latest replay of ``change``, shaped for its page (three queries when done)."""
    run = change_replay_latest(change=change)
    if run is None or run.status != ReplayStatus.DONE or not run.result:
        return ReplayPage(run=run)
    result = run.result
    before, after = result["in_force"], result["with_change"]
    # Highest tier first (a JSON column need not keep the stored order of keys).
    tier_rows = PriorityTier.objects.order_by("-score", "slug").values_list("slug", "name")
    tier_names = dict(tier_rows)
    rank = {slug: index for index, slug in enumerate(tier_names)}
    project_names = dict(Project.objects.values_list("slug", "name"))
    empty: dict[str, Any] = {}
    tiers = [
        _group(
            slug,
            tier_names.get(slug, slug or "–"),
            before["tiers"].get(slug, empty),
            after["tiers"].get(slug, empty),
            TIER_FIGURES,
        )
        for slug in sorted(
            set(before["tiers"]) | set(after["tiers"]), key=lambda slug: (rank.get(slug, 99), slug)
        )
    ]
    projects = [
        _group(
            slug,
            project_names.get(slug, slug),
            before["projects"].get(slug, empty),
            after["projects"].get(slug, empty),
            PROJECT_FIGURES,
        )
        for slug in sorted(set(before["projects"]) | set(after["projects"]))
    ]
    page = ReplayPage(
        run=run,
        overall=[_group("", _("All jobs"), before["all"], after["all"], OVERALL_FIGURES)],
        tiers=tiers,
        projects=projects,
    )
    page.figures = replay_figures(page)
    return page


def _side_by_side(
    groups: list[Group], key: str, y_title: str, *, horizontal: bool = False
) -> dict[str, Any]:
    names = [group.name for group in groups]
    values = {
        side: [next(c for c in group.cells if c.key == key).__dict__[side] for group in groups]
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
    per tier, GPU-hours received per project."""
    return {
        "waits": _side_by_side(page.tiers, "p90", _("p90 wait (minutes)")),
        "lost": _side_by_side(page.tiers, "gpu_hours_lost", _("GPU-hours lost")),
        "service": _side_by_side(
            page.projects, "gpu_hours", _("GPU-hours received"), horizontal=True
        ),
    }
