"""Writes of the reports app: requesting and building stored reviews.

``review_request`` records a queued review (the next version of its window) and queues its
build once the transaction commits; ``review_build`` computes the metrics and findings and
freezes them. A build writes its progress in short transactions of its own, so that the page
watching it sees it move; nothing is frozen until the last one, which stores everything at once.
A built review is never written again (the database refuses it, see the migration).
"""

import logging
from datetime import date, datetime, time, timedelta
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import Pool, Project, User
from governance.services import task_send
from governance.services.demo import demo_lock
from queues.services import workload_hours_roll_up
from reports import selectors
from reports.models import MonthlyReview, ReviewStatus
from reports.selectors.findings import review_findings

logger = logging.getLogger(__name__)


def month_window(*, year: int, month: int) -> tuple[datetime, datetime]:
    """The calendar month as [start, end) instants at local midnight (``TIME_ZONE``)."""
    start = timezone.make_aware(datetime.combine(date(year, month, 1), time.min))
    following = date(year + month // 12, month % 12 + 1, 1)
    return start, timezone.make_aware(datetime.combine(following, time.min))


def previous_month(*, today: date) -> tuple[int, int]:
    first = today.replace(day=1) - timedelta(days=1)
    return first.year, first.month


def _check_scope(*, pool: str, project: str) -> None:
    errors = {}
    if pool and not Pool.objects.filter(slug=pool).exists():
        errors["pool"] = _("No pool with this slug.")
    if project and not Project.objects.filter(slug=project).exists():
        errors["project"] = _("No project with this slug.")
    if errors:
        raise ValidationError(errors)


def _queue_build(review_id: int) -> None:
    task_send(task="reports.tasks.review_build", args=(review_id,))


@transaction.atomic
def review_request(
    *,
    user: User | None,
    start: datetime,
    end: datetime,
    pool: str = "",
    project: str = "",
    now: datetime | None = None,
) -> MonthlyReview:
    """Queue the next version of the review of [start, end) for ``pool``/``project`` (empty:
    all). ``user`` is the operator who asked; ``None`` is the monthly schedule."""
    if user is not None and not user.is_ops:
        raise PermissionDenied(_("Only ops may build a review."))
    now = now or timezone.now()
    if end <= start:
        raise ValidationError({"end": _("The window must end after it starts.")})
    if end > now:
        raise ValidationError(
            {"end": _("The window has not ended yet: a review freezes a window that is over.")}
        )
    _check_scope(pool=pool, project=project)
    window = {"start": start, "end": end, "pool": pool, "project": project}
    # The versions of a window are numbered under a lock of the rows already there; the unique
    # constraint catches two first versions requested at the same instant.
    existing = list(MonthlyReview.objects.select_for_update().filter(**window).values("version"))
    version = max((row["version"] for row in existing), default=0) + 1
    review = MonthlyReview(
        **window,
        version=version,
        requested_by=user,
        requested_at=now,
        status=ReviewStatus.QUEUED,
    )
    review.full_clean()
    try:
        with transaction.atomic():
            review.save()
    except IntegrityError:
        raise ValidationError(
            _("Another build of this window was requested at the same moment; try again.")
        ) from None
    transaction.on_commit(lambda: _queue_build(review.pk))
    return review


@transaction.atomic
def review_request_scheduled(*, today: date, now: datetime | None = None) -> MonthlyReview | None:
    """The monthly schedule: queue the previous calendar month's site-wide review, unless the
    schedule already did (safe to run any number of times)."""
    year, month = previous_month(today=today)
    start, end = month_window(year=year, month=month)
    done = MonthlyReview.objects.filter(
        start=start, end=end, pool="", project="", requested_by=None
    ).exclude(status=ReviewStatus.FAILED)
    if done.exists():
        return None
    return review_request(user=None, start=start, end=end, now=now)


@transaction.atomic
def _review_progress(*, review_id: int, progress: int, status: str | None = None) -> bool:
    """Record progress; ``False`` when the review is no longer this build's to write."""
    review = MonthlyReview.objects.select_for_update().get(pk=review_id)
    if review.is_built:
        return False
    review.progress = min(progress, 99)
    if status is not None:
        review.status = status
        review.error = ""
    review.full_clean()
    review.save(update_fields=["progress", "status", "error"])
    return True


@transaction.atomic
def _review_fail(*, review_id: int, error: str) -> None:
    review = MonthlyReview.objects.select_for_update().get(pk=review_id)
    if review.is_built:
        return
    review.status = ReviewStatus.FAILED
    review.error = error[:2000]
    review.full_clean()
    review.save(update_fields=["status", "error"])


@transaction.atomic
def _review_freeze(
    *,
    review_id: int,
    metrics: dict[str, Any],
    project_metrics: dict[str, Any],
    findings: list[dict[str, Any]],
    now: datetime,
) -> MonthlyReview:
    review = MonthlyReview.objects.select_for_update().get(pk=review_id)
    if review.is_built:  # another worker finished first: keep what it froze
        return review
    review.metrics = metrics
    review.project_metrics = project_metrics
    review.findings = findings
    review.status = ReviewStatus.DONE
    review.progress = 100
    review.built_at = now
    review.error = ""
    review.full_clean()
    review.save()
    return review


def review_build(*, review_id: int, now: datetime | None = None) -> MonthlyReview:
    """Build a queued (or failed, or interrupted) review and freeze it; a built review is
    returned as it is. Safe to run twice: the second run finds it built, or builds the same
    numbers and finds the first run's already frozen."""
    review = MonthlyReview.objects.get(pk=review_id)
    if review.is_built:
        return review
    _review_progress(review_id=review_id, progress=0, status=ReviewStatus.BUILDING)
    scope = {"start": review.start, "end": review.end}
    try:
        # The service and capacity figures read the hourly rollup: bring it up to date first
        # (incremental and idempotent; beat keeps it nearly current, so this is little work).
        workload_hours_roll_up()
        _review_progress(review_id=review_id, progress=20)
        # The site's (or the pool's) figures and every project's view from the same queries:
        # their number does not grow with the number of projects.
        if review.project:
            metrics = selectors.review_metrics(
                **scope, pool=review.pool or None, project=review.project
            )
            project_metrics = {review.project: metrics}
        else:
            metrics, project_metrics = selectors.review_metrics_by_project(
                **scope, pool=review.pool or None
            )
        _review_progress(review_id=review_id, progress=90)
        findings = review_findings(metrics=metrics, start=review.start, end=review.end)
    except Exception as error:
        logger.exception("Review %s: the build failed.", review_id)
        _review_fail(review_id=review_id, error=f"{type(error).__name__}: {error}")
        return MonthlyReview.objects.get(pk=review_id)
    return _review_freeze(
        review_id=review_id,
        metrics=metrics,
        project_metrics=project_metrics,
        findings=findings,
        now=now or timezone.now(),
    )


@transaction.atomic
def demo_reviews_seed(
    *, months: int, today: date | None = None
) -> list[tuple[MonthlyReview, bool]]:
    """The demo's site-wide review of each of the last ``months`` calendar months, built as the
    monthly schedule would have (``seed_demo_reviews``); a month already built is left as it
    is. Returns each month's review, newest first, and whether it was built now. Runs started
    together build one after the other (``demo_lock``): the later finds them built."""
    demo_lock()
    day = today or timezone.localdate()
    reviews = []
    for _n in range(months):
        year, month = previous_month(today=day)
        start, end = month_window(year=year, month=month)
        day = start.date()
        built = MonthlyReview.objects.filter(
            start=start, end=end, pool="", project="", status=ReviewStatus.DONE
        ).first()
        if built is not None:
            reviews.append((built, False))
            continue
        review = review_build(review_id=review_request(user=None, start=start, end=end).pk)
        reviews.append((review, True))
        if review.status != ReviewStatus.DONE:
            break
    return reviews
