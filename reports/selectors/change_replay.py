"""A rule change's replay, shown: the monthly review's figures "in force" and "with the
change" side by side per tier and project, each delta marked better or worse, and the
review's charts (``stored_reviews.figure_layout``/``figure_json``) of both.

Every figure is the review's own, computed by the review's queries over the rows the replay
stored per run and side (``queues.services.replay``), each table swapped for the run's rows
in ``tables()`` (``reports.selectors.replay_tables``):

- the waits: each replayed job's first wait (``ReplayWait``, ``WorkloadWait``'s columns) read
  by ``review.waits.wait_queries`` and shown by the review's table builder
  (``stored_reviews``' wait columns and rows): a wait figure added to the review appears here
  too;
- the service (GPU-hours received, share, guarantee share, borrowed) and the idle GPU-hours:
  the replayed hours (``ReplayHour``, ``WorkloadHour``'s columns) read by
  ``review.service.service_and_capacity``, against the capacity and quotas the side ran under
  (stored in the run's result; the "with the change" side of a capacity or quota change
  measures against the changed ones), not ``PoolCapacity`` and ``Quota``;
- the preemptions (count, GPU-hours lost, early): the replayed preemptions
  (``ReplayPreemption``) read by ``review.preemptions.preemptions``.

The verdicts are ``queues.replay.results.delta``'s.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import plotly.graph_objects as go
from django.core.exceptions import ObjectDoesNotExist
from django.utils.translation import gettext as _

from governance.models import PriorityTier, Project, RuleChange, RulesRevision
from queues.models import ChangeReplay, ReplaySide, ReplayStatus
from queues.replay.results import delta
from queues.selectors import change_replay_latest
from queues.services import RESULT_FORMAT

from .replay_tables import given_rules, quota_table, replay_tables
from .replay_trigger import hours_minutes, trigger_verdict
from .review._common import Names, Scope
from .review.preemptions import preemptions
from .review.service import service_and_capacity
from .review.waits import wait_queries, waits_from_rows
from .stored_reviews import PALETTE, figure_json, figure_layout, wait_columns, wait_row


def _scope(run: ChangeReplay) -> Scope:
    result = run.result or {}
    start = datetime.fromisoformat(result["start"])
    end = datetime.fromisoformat(result["end"])
    return Scope(start=start, end=end, pool=None, project=None)


def replay_waits(*, run: ChangeReplay, side: str, names: Names | None = None) -> dict[str, Any]:
    """The review's waits (``review_metrics``' ``waits``: overall, by tier, project, pool,
    flavor, category and day) of one side of a finished run, by the review's own queries
    over the run's ``ReplayWait`` rows."""
    t = replay_tables(run=run, side=side)
    scope = _scope(run)
    names = names or Names.load()
    rows = [row for query in wait_queries(scope, t, names) for row in query()]
    waits, _per_project = waits_from_rows(rows, names, False)
    return waits


def replay_metrics(*, run: ChangeReplay, side: str, names: Names | None = None) -> dict[str, Any]:
    """The review's figures (``review_metrics``' ``waits``, ``service``, ``capacity`` and
    ``preemptions``) of one side of a finished run, by the review's own queries over the
    run's rows, measured against the capacity and quotas the side ran under."""
    names = names or Names.load()
    t = replay_tables(run=run, side=side)
    scope = _scope(run)
    given = given_rules((run.result or {})[side], scope, names)
    t["quota"] = quota_table(given[2])
    service, _per_project, capacity = service_and_capacity(scope, t, names, given=given)
    overall, per_project = preemptions(scope, t, names)
    pool_gpus: dict[str, float] = defaultdict(float)
    for row in given[0]:
        pool_gpus[names.pools[row["pool_id"]].slug] += row["gpus"]
    return {
        "waits": replay_waits(run=run, side=side, names=names),
        "service": service,
        "capacity": capacity,
        "preemptions": {**overall, "by_project": per_project},
        # The GPUs of each pool the side ran with (the guarantee shares' denominator).
        "pool_gpus": dict(pool_gpus),
    }


def _project_figures(metrics: dict[str, Any], names: Names) -> dict[str, dict[str, Any]]:
    """Per project, its service rows' figures (its pools summed) and its preemptions."""
    rows = metrics["service"]["by_project"]
    pool_used: dict[Any, float] = defaultdict(float)
    for row in rows:
        pool_used[row["pool"]] += row["gpu_hours"]
    mine: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        mine[row["project"]].append(row)
    projects: dict[str, dict[str, Any]] = {}
    for slug, items in mine.items():
        used = sum(row["gpu_hours"] for row in items)
        figures = {
            "gpu_hours": round(used, 2),
            "borrowed_gpu_hours": round(sum(row["borrowed_gpu_hours"] for row in items), 2),
            "guarantee_gpus": sum(row["guarantee_gpus"] for row in items),
            "share": items[0]["share"],
            "guarantee_share": items[0]["guarantee_share"],
        }
        if len(items) > 1:  # across its pools: of its pools' GPU-hours and GPUs
            pools = {row["pool"] for row in items}
            total = sum(pool_used[pool] for pool in pools)
            gpus = sum(metrics["pool_gpus"].get(pool, 0.0) for pool in pools)
            figures["share"] = round(used / total, 4) if total else 0.0
            figures["guarantee_share"] = round(figures["guarantee_gpus"] / gpus, 4) if gpus else 0.0
        projects[slug] = {"preemptions": 0, "gpu_hours_lost": 0.0, **figures}
    slugs = {pk: item.slug for pk, item in names.projects.items() if item is not None}
    for project_id, shaped in metrics["preemptions"]["by_project"].items():
        row = projects.setdefault(slugs[project_id], {})
        row["preemptions"] = shaped["total"]["count"]
        row["gpu_hours_lost"] = shaped["total"]["gpu_hours_lost"]
    return projects


def side_figures(metrics: dict[str, Any], names: Names) -> dict[str, Any]:
    """The figures the page shows beside the waits, from the review's (``replay_metrics``):
    overall, per tier and per project."""
    total = metrics["preemptions"]["total"]
    tiers: dict[str, dict[str, Any]] = {}
    for row in metrics["preemptions"]["by_tier_class"]:
        tier = tiers.setdefault(row["tier"] or "", {"preemptions": 0, "gpu_hours_lost": 0.0})
        tier["preemptions"] += row["count"]
        tier["gpu_hours_lost"] = round(tier["gpu_hours_lost"] + row["gpu_hours_lost"], 2)
    capacity = metrics["capacity"]["total"]
    rows = metrics["service"]["by_project"]
    return {
        "all": {
            "preemptions": total["count"],
            "gpu_hours_lost": total["gpu_hours_lost"],
            "gpu_hours": capacity["allocated_gpu_hours"],
            "borrowed_gpu_hours": round(sum(row["borrowed_gpu_hours"] for row in rows), 2),
            "idle_gpu_hours": capacity["idle_gpu_hours"],
        },
        "tiers": tiers,
        "projects": _project_figures(metrics, names),
    }


# The review's figures the page shows beside its waits (``side_figures``).
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
    # A wait in minutes (the review's unit), shown in hours and minutes.
    wait: bool = False

    @property
    def label_text(self) -> str:
        """The label as shown: a wait's without the table's unit (it reads "2 h 05 min")."""
        if not self.wait:
            return str(self.label)
        return re.sub(r"\s*[(（][^()（）]*[)）]$", "", str(self.label))

    def _shown(self, value: Any, signed: bool = False) -> Any:
        if not self.wait or value is None:
            return value
        return hours_minutes(float(value), signed=signed)

    @property
    def before_text(self) -> Any:
        return self._shown(self.before)

    @property
    def after_text(self) -> Any:
        return self._shown(self.after)

    @property
    def change_text(self) -> Any:
        return self._shown(self.change, signed=True)


@dataclass
class Group:
    slug: str
    name: str
    cells: list[Cell] = field(default_factory=list)


def _wait_cells(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[Cell]:
    """The review's wait columns of one row (its table builder's labels, values and units),
    before and after: every wait figure is a wait or a count of jobs that waited, so lower is
    better; the number of jobs is neutral."""
    labels = [label for label, _numeric in wait_columns("", both=False)][1:]
    b_row = wait_row(before, "", both=False)[1:] if before else [None] * len(labels)
    a_row = wait_row(after, "", both=False)[1:] if after else [None] * len(labels)
    # The columns that count jobs; every other wait column is a wait in minutes.
    counts = {_("Jobs"), _("Never started"), _("Still waiting at the end"), _("Over the threshold")}
    cells = []
    for index, (label, b, a) in enumerate(zip(labels, b_row, a_row, strict=True)):
        key = "jobs" if index == 0 else f"wait_{index}"
        d = delta("wait" if index else "jobs", b, a)
        wait = str(label) not in counts
        cells.append(
            Cell(
                key=key,
                label=label,
                before=b,
                after=a,
                change=d["value"],
                verdict=d["verdict"],
                wait=wait,
            )
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
    # Stored in an older format, without the rows the review's queries read.
    outdated: bool = False
    # The review's waits of each side (``replay_waits``), for the API.
    waits: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The rules revision the run replayed, and the latest: a run of an older revision no
    # longer answers for the rules in force (``rules_changed``).
    run_revision: int | None = None
    current_revision: int | None = None
    # The tiers and projects the change edits (``_change_focus``): they lead the page.
    focus: dict[str, set[str]] = field(default_factory=lambda: {"tiers": set(), "projects": set()})
    # The change's own rollback trigger evaluated on this run (``replay_trigger``).
    rollback: Any = None

    def _split(self, groups: list[Group], kind: str, lead: bool) -> list[Group]:
        return [group for group in groups if (group.slug in self.focus[kind]) == lead]

    @property
    def focus_tiers(self) -> list[Group]:
        return self._split(self.tiers, "tiers", True)

    @property
    def other_tiers(self) -> list[Group]:
        return self._split(self.tiers, "tiers", False)

    @property
    def focus_projects(self) -> list[Group]:
        return self._split(self.projects, "projects", True)

    @property
    def other_projects(self) -> list[Group]:
        return self._split(self.projects, "projects", False)

    @property
    def rules_changed(self) -> bool:
        return self.run is not None and self.run_revision != self.current_revision


def change_replay_page(*, change: RuleChange) -> ReplayPage:
    """The latest replay of ``change``, shaped for its page (the review's wait, service and
    preemption queries over each side's rows, when done)."""
    run = change_replay_latest(change=change)
    if run is None or run.status != ReplayStatus.DONE or not run.result:
        return ReplayPage(run=run)
    run_revision: int | None = (run.inputs or {}).get("rules_revision")
    current_revision = RulesRevision.objects.order_by("-pk").values_list("pk", flat=True).first()
    if run.result.get("format") != RESULT_FORMAT:  # made before its rows were all stored
        return ReplayPage(
            run=run,
            outdated=True,
            run_revision=run_revision,
            current_revision=current_revision,
        )
    names = Names.load()
    metrics = {side: replay_metrics(run=run, side=side, names=names) for side in ReplaySide.values}
    waits = {side: metrics[side]["waits"] for side in ReplaySide.values}
    before, after = (side_figures(metrics[side], names) for side in ReplaySide.values)
    in_force, with_change = waits[ReplaySide.IN_FORCE], waits[ReplaySide.WITH_CHANGE]

    tiers = _tier_groups(names, (in_force, with_change), (before, after))
    projects = _project_groups(names, (in_force, with_change), (before, after))
    overall = _group(
        "",
        _("All jobs"),
        (in_force["overall"], with_change["overall"]),
        before["all"],
        after["all"],
        OVERALL_FIGURES,
    )
    focus = _change_focus(change)
    page = ReplayPage(
        run=run,
        overall=[overall],
        tiers=_focus_first(tiers, focus["tiers"]),
        projects=_focus_first(projects, focus["projects"]),
        waits=waits,
        focus=focus,
        run_revision=run_revision,
        current_revision=current_revision,
    )
    page.figures = replay_figures(page)
    page.rollback = trigger_verdict(change=change, page=page)
    return page


def _by(rows: list[dict[str, Any]], key: str) -> dict[Any, dict[str, Any]]:
    return {row[key]: row for row in rows}


EMPTY_SIDE: dict[str, Any] = {"preemptions": 0, "gpu_hours_lost": 0.0}


def _tier_groups(
    names: Names, waits: tuple[dict[str, Any], dict[str, Any]], sides: tuple[Any, Any]
) -> list[Any]:
    """Each tier's figures on both sides, the highest tier first (a JSON column need not keep
    the stored order of keys)."""
    before, after = sides
    tier_rows = sorted(
        (tier for tier in names.tiers.values() if tier is not None),
        key=lambda tier: (-tier.score, tier.slug),
    )
    tier_names = {tier.slug: tier.name for tier in tier_rows}
    rank = {slug: index for index, slug in enumerate(tier_names)}
    tier_waits = (_by(waits[0]["by_tier"], "tier"), _by(waits[1]["by_tier"], "tier"))
    tier_slugs = set(before["tiers"]) | set(after["tiers"]) | set(tier_waits[0])
    return [
        _group(
            slug,
            tier_names.get(slug, slug or "–"),
            (tier_waits[0].get(slug), tier_waits[1].get(slug)),
            before["tiers"].get(slug, EMPTY_SIDE),
            after["tiers"].get(slug, EMPTY_SIDE),
            TIER_FIGURES,
        )
        for slug in sorted(
            (slug for slug in tier_slugs | set(tier_waits[1]) if slug is not None),
            key=lambda slug: (rank.get(slug, 99), slug),
        )
    ]


def _project_groups(
    names: Names, waits: tuple[dict[str, Any], dict[str, Any]], sides: tuple[Any, Any]
) -> list[Any]:
    """Each project's figures on both sides, by name."""
    before, after = sides
    project_names = {p.slug: p.name for p in names.projects.values() if p is not None}
    project_waits = (_by(waits[0]["by_project"], "project"), _by(waits[1]["by_project"], "project"))
    project_slugs = set(before["projects"]) | set(after["projects"]) | set(project_waits[0])
    return [
        _group(
            slug,
            project_names.get(slug, slug),
            (project_waits[0].get(slug), project_waits[1].get(slug)),
            before["projects"].get(slug, EMPTY_SIDE),
            after["projects"].get(slug, EMPTY_SIDE),
            PROJECT_FIGURES,
        )
        for slug in sorted(
            (slug for slug in project_slugs | set(project_waits[1]) if slug),
            key=lambda slug: (project_names.get(slug, slug), slug),
        )
    ]


def _change_focus(change: RuleChange) -> dict[str, set[str]]:
    """The tiers and projects ``change`` edits: a tier itself, a project, or the project of
    a quota or grant (a project's tier edit names both)."""
    focus: dict[str, set[str]] = {"tiers": set(), "projects": set()}
    for edit in change.edits.select_related("content_type"):
        try:
            target = edit.content_type.get_object_for_this_type(pk=edit.object_id)
        except ObjectDoesNotExist:  # a proposed creation: no object yet
            continue
        if isinstance(target, PriorityTier):
            focus["tiers"].add(target.slug)
        if isinstance(target, Project):
            focus["projects"].add(target.slug)
        project = getattr(target, "project", None)
        if isinstance(project, Project):
            focus["projects"].add(project.slug)
        tier = getattr(target, "tier", None)
        if isinstance(tier, PriorityTier):
            focus["tiers"].add(tier.slug)
    return focus


def _focus_first(groups: list[Group], focus: set[str]) -> list[Group]:
    """The groups the change edits first, the others in their order."""
    return sorted(groups, key=lambda group: group.slug not in focus)


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
