"""Reads of stored reviews: the scoped getter, the list, and everything the pages show of a
review — its tables (also the CSV downloads), its plotly figures and the comparison of two.

Everything here reads the review's frozen JSON, never the live evidence: a built review shows
the same numbers however much evidence arrives later.

The package holds one concern a module: ``access`` (the scoped getter and the lists),
``tables``, ``downloads`` (the CSV), ``findings`` (the findings in words), ``style`` and
``figures`` (plotly), ``trend`` (twelve months of reviews), ``compare`` (two versions or
months side by side).
"""

from .access import (
    latest_review,
    led_project_slugs,
    review_choices,
    review_get,
    review_list,
    review_project_links,
    review_projects,
    review_versions,
    user_can_read_reviews,
)
from .compare import Delta, review_compare
from .downloads import review_csv_rows
from .figures import review_figures
from .findings import review_findings_shown
from .style import PALETTE, figure_json, figure_layout
from .tables import Table, review_tables, wait_columns, wait_row
from .trend import review_trend, trend_figure, trend_table

__all__ = [
    "PALETTE",
    "Delta",
    "Table",
    "figure_json",
    "figure_layout",
    "latest_review",
    "led_project_slugs",
    "review_choices",
    "review_compare",
    "review_csv_rows",
    "review_figures",
    "review_findings_shown",
    "review_get",
    "review_list",
    "review_project_links",
    "review_projects",
    "review_tables",
    "review_trend",
    "review_versions",
    "trend_figure",
    "trend_table",
    "user_can_read_reviews",
    "wait_columns",
    "wait_row",
]
