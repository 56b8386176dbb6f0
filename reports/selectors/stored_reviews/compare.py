"""Two built reviews side by side."""

from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _

from reports.models import MonthlyReview

from ._format import minutes, row_name


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


def days_of(review: MonthlyReview) -> float:
    """The review's window in days (a month of 31 days has more GPU-hours than one of 30)."""
    return max((review.end - review.start).total_seconds() / 86400, 1 / 24)


def _per_day(value: float | None, days: float) -> float | None:
    return None if value is None else round(value / days, 2)


def review_compare(*, a: MonthlyReview, b: MonthlyReview) -> list[tuple[str, list[Delta]]]:
    """Two built reviews side by side: per section, the figures of A, of B, and B − A.
    Amounts that grow with the window's length (GPU-hours, preemptions, exceptions) are per
    day, so that a longer month is not worse for being longer; waits are per job already."""
    ma, mb = a.metrics, b.metrics
    da, db = days_of(a), days_of(b)
    return [
        (_("Waits, all jobs"), _overall_waits(ma, mb)),
        (_("Waits by tier"), _tier_waits(ma, mb)),
        (_("Capacity"), _capacity(ma, mb, da, db)),
        (_("Service"), _service(ma, mb, da, db)),
        (_("Preemptions, exceptions and findings"), _preemptions_and_exceptions(a, b, da, db)),
    ]


def _overall_waits(ma: dict[str, Any], mb: dict[str, Any]) -> list[Delta]:
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
            va, vb = minutes(va), minutes(vb)
        overall.append(_delta(label, va, vb, higher_is_worse=True))
    return overall


def _tier_waits(ma: dict[str, Any], mb: dict[str, Any]) -> list[Delta]:
    """B's tiers, each against the same tier in A (none there: no figure of A)."""
    tiers_a = {row["tier"]: row for row in ma["waits"]["by_tier"]}
    tier_rows = []
    for row in mb["waits"]["by_tier"]:
        other = tiers_a.get(row["tier"], {})
        tier_rows.append(
            _delta(
                _("%(tier)s: p90 wait (min)") % {"tier": row_name(row, "tier")},
                minutes(other.get("p90")),
                minutes(row["p90"]),
                higher_is_worse=True,
            )
        )
        tier_rows.append(
            _delta(
                _("%(tier)s: over the threshold") % {"tier": row_name(row, "tier")},
                other.get("over_threshold"),
                row["over_threshold"],
                higher_is_worse=True,
            )
        )
    return tier_rows


def _capacity(ma: dict[str, Any], mb: dict[str, Any], da: float, db: float) -> list[Delta]:
    cap_a, cap_b = ma["capacity"]["total"], mb["capacity"]["total"]
    return [
        _delta(
            _("Available (GPU-hours a day)"),
            _per_day(cap_a["available_gpu_hours"], da),
            _per_day(cap_b["available_gpu_hours"], db),
            higher_is_worse=None,
        ),
        _delta(
            _("Allocated (GPU-hours a day)"),
            _per_day(cap_a["allocated_gpu_hours"], da),
            _per_day(cap_b["allocated_gpu_hours"], db),
            higher_is_worse=False,
        ),
        _delta(
            _("Idle (GPU-hours a day)"),
            _per_day(cap_a["idle_gpu_hours"], da),
            _per_day(cap_b["idle_gpu_hours"], db),
            higher_is_worse=True,
        ),
        _delta(
            _("Idle while a project waited on quota (GPU-hours a day)"),
            _per_day(cap_a["idle_while_quota_waiting_gpu_hours"], da),
            _per_day(cap_b["idle_while_quota_waiting_gpu_hours"], db),
            higher_is_worse=True,
        ),
    ]


def _service(ma: dict[str, Any], mb: dict[str, Any], da: float, db: float) -> list[Delta]:
    """B's projects in their pools, each against the same in A."""
    service_a = {(r["project"], r["pool"]): r for r in ma["service"]["by_project"]}
    service_rows = []
    for row in mb["service"]["by_project"]:
        other = service_a.get((row["project"], row["pool"]), {})
        service_rows.append(
            _delta(
                f"{row['name']} · {row['pool'] or '–'}: " + _("GPU-hours received a day"),
                _per_day(other.get("gpu_hours"), da),
                _per_day(row["gpu_hours"], db),
                higher_is_worse=None,
            )
        )
    return service_rows


def _preemptions_and_exceptions(
    a: MonthlyReview, b: MonthlyReview, da: float, db: float
) -> list[Delta]:
    """Preemptions, exceptions requested and findings (the findings are the review's own)."""
    ma, mb = a.metrics, b.metrics
    pre_a, pre_b = ma["preemptions"]["total"], mb["preemptions"]["total"]
    exc_a = sum(row["requested"] for row in ma["exceptions"]["by_project_kind"])
    exc_b = sum(row["requested"] for row in mb["exceptions"]["by_project_kind"])
    return [
        _delta(
            _("Preemptions a day"),
            _per_day(pre_a["count"], da),
            _per_day(pre_b["count"], db),
            higher_is_worse=True,
        ),
        _delta(
            _("GPU-hours lost a day"),
            _per_day(pre_a["gpu_hours_lost"], da),
            _per_day(pre_b["gpu_hours_lost"], db),
            higher_is_worse=True,
        ),
        _delta(
            _("Exceptions requested a day"),
            _per_day(exc_a, da),
            _per_day(exc_b, db),
            higher_is_worse=True,
        ),
        _delta(_("Findings"), len(a.findings), len(b.findings), higher_is_worse=True),
    ]
