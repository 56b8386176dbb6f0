"""This month so far: the review's figures and findings from the first of the month up to
the last full hour, computed when asked and never stored (not frozen: they change as the
month goes on; the review frozen for the month is built once it has ended).

The same metrics and findings as a built review (``review_metrics_by_project``,
``review_findings``), on an unsaved ``MonthlyReview`` so the review's own pages render it.
The usage figures read the hourly rollup as its last run left it (beat keeps it nearly
current; ``rollup_at`` says when), the waits the jobs' derived waits of the same run: a
page view writes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from django.utils import timezone

from queues.models import ROLLUP_NAME, RollupState
from reports.models import MonthlyReview, ReviewStatus
from reports.selectors.findings import review_findings
from reports.selectors.review import review_metrics_by_project


@dataclass
class MonthToDate:
    review: MonthlyReview  # unsaved: no pk, never frozen
    rollup_at: datetime | None  # the hourly rollup's last run: usage is counted up to it


def month_to_date_window(*, now: datetime) -> tuple[datetime, datetime]:
    """[the first of this month at local midnight, the start of the current UTC hour)."""
    first = timezone.localdate(now).replace(day=1)
    start = timezone.make_aware(datetime.combine(first, time.min))
    end = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return start, max(end, start)


def month_to_date_review(*, now: datetime | None = None) -> MonthToDate:
    """The site's review of this month so far (see the module's docstring); empty figures
    in the month's first hour."""
    now = now or timezone.now()
    start, end = month_to_date_window(now=now)
    if end <= start:  # the month's first hour: nothing to count yet
        end = start + timedelta(hours=1)
    metrics, project_metrics = review_metrics_by_project(start=start, end=end)
    review = MonthlyReview(
        start=start,
        end=end,
        status=ReviewStatus.DONE,
        metrics=metrics,
        project_metrics=project_metrics,
        findings=review_findings(metrics=metrics, start=start, end=end),
        built_at=now,
    )
    rollup_at = (
        RollupState.objects.filter(name=ROLLUP_NAME).values_list("last_run_at", flat=True).first()
    )
    return MonthToDate(review=review, rollup_at=rollup_at)
