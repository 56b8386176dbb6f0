"""Who reads which review, and the lists of reviews: the one scoped getter of a review."""

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.http import Http404
from django.utils.translation import gettext as _

from governance.models import Membership, ProjectRole
from reports.models import MonthlyReview, ReviewStatus


def user_can_read_reviews(user: Any) -> bool:
    """Ops read every review; a project's lead reads their project's view of it."""
    return bool(getattr(user, "is_ops", False))


def led_project_slugs(*, user: Any) -> set[str]:
    return set(
        Membership.objects.filter(user=user, role=ProjectRole.LEAD).values_list(
            "project__slug", flat=True
        )
    )


def review_get(*, user: Any, pk: int, project: str | None = None) -> MonthlyReview:
    """The one getter of a review: 404 when there is none (or, for a project's view, when
    the review has nothing on the project), 403 when ``user`` may not read it. The whole
    review is for ops; a project's view for ops and the project's leads."""
    review = MonthlyReview.objects.select_related("requested_by").filter(pk=pk).first()
    if review is None:
        raise Http404(_("No such review."))
    if project is None:
        if not user_can_read_reviews(user):
            raise PermissionDenied(_("Only ops read the whole review."))
        return review
    if not (user_can_read_reviews(user) or project in led_project_slugs(user=user)):
        raise PermissionDenied(_("Only ops and the project's leads read its review."))
    if review.is_built and project not in review.project_metrics:
        raise Http404(_("The review has nothing on this project."))
    return review


def review_list(*, user: Any) -> QuerySet[MonthlyReview]:
    """Ops: every review; a lead: the built site-wide reviews (their projects' views)."""
    reviews = MonthlyReview.objects.select_related("requested_by").defer(
        "metrics", "project_metrics", "findings"
    )
    if user_can_read_reviews(user):
        return reviews
    if not led_project_slugs(user=user):
        raise PermissionDenied(_("Only ops and project leads read the reviews."))
    return reviews.filter(status=ReviewStatus.DONE, pool="", project="")


def review_project_links(
    *, led: Iterable[str], reviews: Iterable[MonthlyReview]
) -> dict[int, list[str]]:
    """For each built review of ``reviews``, the project views a lead of the projects ``led``
    (``led_project_slugs``) may open from the list: those the review has numbers on
    (``review_get`` answers 404 for the others). One query for the page, whatever its length."""
    slugs = sorted(led)
    built = [review.pk for review in reviews if review.is_built]
    if not slugs or not built:
        return {}
    has = {
        f"has_{i}_": ExpressionWrapper(
            Q(project_metrics__has_key=slug), output_field=BooleanField()
        )
        for i, slug in enumerate(slugs)
    }
    links: dict[int, list[str]] = {}
    for row in MonthlyReview.objects.filter(pk__in=built).annotate(**has).values("pk", *has):
        links[row["pk"]] = [slug for i, slug in enumerate(slugs) if row[f"has_{i}_"]]
    return links


def latest_review() -> MonthlyReview | None:
    """The newest built site-wide review (the home page links to it)."""
    return (
        MonthlyReview.objects.filter(status=ReviewStatus.DONE, pool="", project="")
        .only("pk", "start", "end", "version", "built_at")
        .order_by("-start", "-version")
        .first()
    )


def review_projects(*, metrics: dict[str, Any]) -> list[tuple[str, str]]:
    """(slug, name) of every project the review has numbers on, by name."""
    names = {}
    for row in metrics["service"]["by_project"] + metrics["waits"]["by_project"]:
        if row.get("project"):
            names[row["project"]] = row["name"]
    return sorted(names.items(), key=lambda item: item[1])


def review_versions(*, review: MonthlyReview) -> list[MonthlyReview]:
    return list(
        MonthlyReview.objects.filter(
            start=review.start, end=review.end, pool=review.pool, project=review.project
        )
        .only("pk", "version", "status", "built_at")
        .order_by("version")
    )


def review_choices() -> list[MonthlyReview]:
    """The built reviews one may compare with (newest first)."""
    return list(
        MonthlyReview.objects.filter(status=ReviewStatus.DONE)
        .only("pk", "start", "end", "pool", "project", "version")
        .order_by("-start", "-version")
    )
