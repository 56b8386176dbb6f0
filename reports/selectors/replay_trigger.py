"""A change's own rollback trigger (``RuleChange.rollback_trigger``) evaluated on its replay:
would the condition have fired with the change, and by how much.

The figure is the replay page's own: a wait percentile or mean of the review's waits
(``replay_waits``: overall, by tier, project or pool; in minutes), or the preemptions and
GPU-hours lost of the page's groups, "in force" and "with the change". A comparison
(``>``, ``>=``, ``<``, ``<=``) holds the figure with the change against the threshold;
``rises by`` the change's delta (with ``%``: relative to in force). The margin is how far
the compared value is from the threshold (positive: past it, in the triggering direction).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from governance.models import (
    RuleChange,
    Trigger,
    TriggerComparison,
    TriggerMetric,
    TriggerScope,
    parse_trigger,
)


def hours_minutes(minutes: float, *, signed: bool = False) -> str:
    """A wait given in minutes, as a reader says it: "2 h 05 min", "7 min", "40 s"."""
    sign = "−" if minutes < 0 else ("+" if signed and minutes > 0 else "")
    seconds = round(abs(minutes) * 60)
    if seconds < 60:
        text = _("%(s)d s") % {"s": seconds}
    elif seconds < 3600:
        text = _("%(m)d min") % {"m": round(seconds / 60)}
    else:
        whole = round(seconds / 60)
        text = _("%(h)d h %(m)02d min") % {"h": whole // 60, "m": whole % 60}
    return sign + text


@dataclass
class TriggerVerdict:
    trigger: Trigger
    text: str
    # None: not evaluated (``problem`` says why).
    triggered: bool | None = None
    before: float | None = None
    after: float | None = None
    compared: float | None = None  # after, or the rise (absolute or in %)
    margin: float | None = None  # compared − threshold, signed in the triggering direction
    problem: str = ""

    @property
    def unit(self) -> str:
        return self.trigger.unit

    @property
    def distance(self) -> float | None:
        """How far from the threshold, either way (the page says past it or short of it)."""
        return None if self.margin is None else abs(self.margin)

    def _text(self, value: float | None) -> str | None:
        """A figure as the page shows it: a wait in minutes in hours and minutes."""
        if value is None:
            return None
        if self.unit == "min":
            return hours_minutes(value)
        return f"{value:,.2f}".rstrip("0").rstrip(".") + (f" {self.unit}" if self.unit else "")

    @property
    def before_text(self) -> str | None:
        return self._text(self.before)

    @property
    def after_text(self) -> str | None:
        return self._text(self.after)

    @property
    def distance_text(self) -> str | None:
        return self._text(self.distance)


_WAIT_SETS = {
    TriggerScope.TIER: ("by_tier", "tier"),
    TriggerScope.PROJECT: ("by_project", "project"),
    TriggerScope.POOL: ("by_pool", "pool"),
}


def _wait_figure(waits: dict[str, Any], trigger: Trigger) -> float | None:
    """The trigger's wait figure (minutes) in one side's waits; None without jobs."""
    if trigger.scope == TriggerScope.ALL:
        row: dict[str, Any] | None = waits.get("overall")
    else:
        key, slug_key = _WAIT_SETS[TriggerScope(trigger.scope)]
        row = next((r for r in waits.get(key, []) if r.get(slug_key) == trigger.target), None)
    if not row or not row.get("jobs") or row.get(trigger.metric) is None:
        return None
    return round(float(row[trigger.metric]) / 60, 3)


def _group_figure(groups: list[Any], slug: str, key: str) -> tuple[Any, Any] | None:
    for group in groups:
        if group.slug == slug:
            for cell in group.cells:
                if cell.key == key:
                    return cell.before, cell.after
    return None


def _figures(page: Any, trigger: Trigger) -> tuple[float | None, float | None]:
    if trigger.is_wait:
        return (
            _wait_figure(page.waits.get("in_force", {}), trigger),
            _wait_figure(page.waits.get("with_change", {}), trigger),
        )
    key = "preemptions" if trigger.metric == TriggerMetric.PREEMPTED else "gpu_hours_lost"
    groups = {
        TriggerScope.ALL: page.overall,
        TriggerScope.TIER: page.tiers,
        TriggerScope.PROJECT: page.projects,
    }[TriggerScope(trigger.scope)]
    found = _group_figure(groups, trigger.target, key)
    if found is None:
        return None, None
    before, after = found
    return (
        None if before is None else float(before),
        None if after is None else float(after),
    )


def _decide(verdict: TriggerVerdict) -> None:
    trigger, before, after = verdict.trigger, verdict.before, verdict.after
    if trigger.comparison == TriggerComparison.RISES_BY:
        if before is None or after is None:
            verdict.problem = _("The replay has no figure on one of its sides to compare.")
            return
        if trigger.relative:
            if before == 0:
                verdict.problem = _("In force the figure is 0: a rise in % is undefined.")
                return
            compared = (after - before) / before * 100
        else:
            compared = after - before
        verdict.compared = round(compared, 3)
        verdict.margin = round(compared - trigger.threshold, 3)
        verdict.triggered = compared > trigger.threshold
        return
    if after is None:
        verdict.problem = _("The replay has no jobs in this scope with the change.")
        return
    verdict.compared = after
    upward = trigger.comparison in (TriggerComparison.ABOVE, TriggerComparison.AT_LEAST)
    verdict.margin = round((after - trigger.threshold) * (1 if upward else -1), 3)
    verdict.triggered = {
        TriggerComparison.ABOVE: after > trigger.threshold,
        TriggerComparison.AT_LEAST: after >= trigger.threshold,
        TriggerComparison.BELOW: after < trigger.threshold,
        TriggerComparison.AT_MOST: after <= trigger.threshold,
    }[TriggerComparison(trigger.comparison)]


def trigger_verdict(*, change: RuleChange, page: Any) -> TriggerVerdict | None:
    """The change's rollback trigger evaluated on its replay page's figures (a finished run's
    ``ReplayPage``); None when the change has no trigger."""
    if not change.rollback_trigger:
        return None
    try:
        trigger = parse_trigger(change.rollback_trigger)
    except ValidationError:  # stored before a rule of the language changed
        return None
    verdict = TriggerVerdict(trigger=trigger, text=trigger.text)
    verdict.before, verdict.after = _figures(page, trigger)
    _decide(verdict)
    return verdict


def verdict_json(verdict: TriggerVerdict | None) -> dict[str, Any] | None:
    """The verdict for the API."""
    if verdict is None:
        return None
    return {
        "trigger": verdict.text,
        "triggered": verdict.triggered,
        "in_force": verdict.before,
        "with_change": verdict.after,
        "compared": verdict.compared,
        "threshold": verdict.trigger.threshold,
        "unit": verdict.unit,
        "margin": verdict.margin,
        "problem": verdict.problem,
    }
