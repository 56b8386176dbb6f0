"""Reads of the ``reports`` app: the home page and the monthly review's metrics."""

from .home import ProjectSummary, pool_usage_figure, project_summaries
from .review import review_metrics, review_metrics_by_project

__all__ = [
    "ProjectSummary",
    "pool_usage_figure",
    "project_summaries",
    "review_metrics",
    "review_metrics_by_project",
]
