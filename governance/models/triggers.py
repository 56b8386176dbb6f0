"""A rule change's rollback trigger: the rollback condition in a form a program can evaluate.

A change's ``rollback_condition`` is free text (a note for people). Its ``rollback_trigger``
says the same in a small language that a replay of the change evaluates ("would have
triggered: yes/no, by how much"):

    <metric> <scope> <comparison> <threshold> [<unit>]

- ``metric``: ``p50``, ``p90``, ``p95``, ``p99`` or ``mean`` (a wait, in minutes; the word
  ``wait`` may follow), ``preempted`` (preemptions, a count) or ``lost`` (GPU-hours lost to
  preemption);
- ``scope``: ``all``, or ``tier <slug>``, ``project <slug>`` (``pool <slug>`` for waits);
- ``comparison``: ``>``, ``>=``, ``<``, ``<=`` (the figure with the change against the
  threshold), or ``rises by`` (with the change minus in force, more than the threshold; with
  ``%``, relative to in force);
- ``threshold``: a number; its unit: ``min`` for waits (the default), ``%`` after
  ``rises by``.

Examples: ``p90 wait tier training > 30 min``, ``p95 project vision rises by 20 %``,
``preempted all >= 50``. ``parse_trigger`` reads one (or raises ``ValidationError`` with
what is wrong); ``Trigger.text`` writes its canonical form, which is what is stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _


# The language's keywords. Plain constants, not TextChoices: they are typed in this form in
# any language (a trigger is code, not prose), so they are no words of the pages' vocabulary.
class TriggerMetric(StrEnum):
    P50 = "p50"
    P90 = "p90"
    P95 = "p95"
    P99 = "p99"
    MEAN = "mean"
    PREEMPTED = "preempted"  # preemptions (a count)
    LOST = "lost"  # GPU-hours lost to preemption


class TriggerScope(StrEnum):
    ALL = "all"
    TIER = "tier"
    PROJECT = "project"
    POOL = "pool"


class TriggerComparison(StrEnum):
    ABOVE = ">"
    AT_LEAST = ">="
    BELOW = "<"
    AT_MOST = "<="
    RISES_BY = "rises by"


def _values(kind: type[StrEnum]) -> list[str]:
    return [item.value for item in kind]


WAIT_METRICS = frozenset({"p50", "p90", "p95", "p99", "mean"})
_SLUG = re.compile(r"[-a-zA-Z0-9_]+")
_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?")


@dataclass(frozen=True)
class Trigger:
    metric: str
    scope: str
    target: str  # the tier's, project's or pool's slug; "" for all
    comparison: str
    threshold: float
    relative: bool = False  # "rises by N %"

    @property
    def is_wait(self) -> bool:
        return self.metric in WAIT_METRICS

    @property
    def unit(self) -> str:
        if self.relative:
            return "%"
        return "min" if self.is_wait else ""

    @property
    def text(self) -> str:
        """The canonical form (what is stored)."""
        metric = f"{self.metric} wait" if self.is_wait else self.metric
        scope = self.scope if self.scope == TriggerScope.ALL else f"{self.scope} {self.target}"
        threshold = f"{self.threshold:g}"
        unit = f" {self.unit}" if self.unit else ""
        return f"{metric} {scope} {self.comparison} {threshold}{unit}"


def _tokens(text: str) -> list[str]:
    spaced = re.sub(r"(>=|<=|>|<|%)", r" \1 ", text.strip().lower())
    return spaced.split()


def _metric(tokens: list[str]) -> str:
    if not tokens:
        raise ValidationError(_("Empty: give a metric, a scope, a comparison and a threshold."))
    word = tokens.pop(0)
    if word not in _values(TriggerMetric):
        raise ValidationError(
            _("Unknown metric “%(word)s”: use one of %(metrics)s.")
            % {"word": word, "metrics": ", ".join(_values(TriggerMetric))}
        )
    if tokens and tokens[0] == "wait":
        if word not in WAIT_METRICS:
            raise ValidationError(_("“wait” follows only a wait metric (p50 … p99, mean)."))
        tokens.pop(0)
    return word


def _scope(tokens: list[str], metric: str) -> tuple[str, str]:
    if not tokens:
        raise ValidationError(
            _("A scope is missing: all, tier <slug>, project <slug> or pool <slug>.")
        )
    word = tokens.pop(0)
    if word == TriggerScope.ALL:
        return word, ""
    if word not in _values(TriggerScope):
        raise ValidationError(
            _("Unknown scope “%(word)s”: use all, tier <slug>, project <slug> or pool <slug>.")
            % {"word": word}
        )
    if word == TriggerScope.POOL and metric not in WAIT_METRICS:
        raise ValidationError(_("A pool's scope holds waits only (p50 … p99, mean)."))
    if not tokens or not _SLUG.fullmatch(tokens[0]):
        raise ValidationError(
            _("The %(scope)s's slug is missing after “%(scope)s”.") % {"scope": word}
        )
    return word, tokens.pop(0)


def _comparison(tokens: list[str]) -> str:
    if not tokens:
        raise ValidationError(_("A comparison is missing: >, >=, <, <= or “rises by”."))
    word = tokens.pop(0)
    if word == "rises":
        if not tokens or tokens.pop(0) != "by":
            raise ValidationError(_("Write “rises by” followed by a number."))
        return TriggerComparison.RISES_BY.value
    if word not in _values(TriggerComparison):
        raise ValidationError(
            _("Unknown comparison “%(word)s”: use >, >=, <, <= or “rises by”.") % {"word": word}
        )
    return word


def _threshold(tokens: list[str], metric: str, comparison: str) -> tuple[float, bool]:
    if not tokens or not _NUMBER.fullmatch(tokens[0]):
        raise ValidationError(_("The threshold must be a number of zero or more."))
    value = float(tokens.pop(0))
    relative = False
    if tokens and tokens[0] == "%":
        if comparison != TriggerComparison.RISES_BY:
            raise ValidationError(_("A threshold in % goes with “rises by” only."))
        tokens.pop(0)
        relative = True
    elif tokens and tokens[0] in ("min", "minutes", "minute"):
        if metric not in WAIT_METRICS:
            raise ValidationError(_("Minutes are the unit of waits only."))
        tokens.pop(0)
    if tokens:
        raise ValidationError(
            _("Unexpected “%(rest)s” after the threshold.") % {"rest": " ".join(tokens)}
        )
    if value > 1_000_000:
        raise ValidationError(_("The threshold is too large."))
    return value, relative


def parse_trigger(text: str) -> Trigger:
    """A trigger from its text (``ValidationError`` saying what is wrong)."""
    tokens = _tokens(text)
    metric = _metric(tokens)
    scope, target = _scope(tokens, metric)
    comparison = _comparison(tokens)
    threshold, relative = _threshold(tokens, metric, comparison)
    return Trigger(metric, scope, target, comparison, threshold, relative)


def validate_rollback_trigger(value: str) -> None:
    """The model field's validator: empty, or a trigger ``parse_trigger`` reads."""
    if value.strip():
        parse_trigger(value)
