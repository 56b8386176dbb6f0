"""The whole review as one CSV file."""

from typing import Any

from django.utils.translation import gettext as _

from reports.models import MonthlyReview

from .findings import review_findings_shown
from .tables import review_tables


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
