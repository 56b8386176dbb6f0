"""Celery tasks of the reports app. Each one only calls a service."""

from celery import shared_task
from django.utils import timezone

from reports import services
from reports.models import MonthlyReview


@shared_task(acks_late=True)
def review_build(review_id: int) -> str:
    """Build a requested review (safe to run twice: a built review is left as it is)."""
    if not MonthlyReview.objects.filter(pk=review_id).exists():
        return "gone"
    return services.review_build(review_id=review_id).status


@shared_task
def monthly_review_schedule() -> int | None:
    """Periodic (the 1st of each month): queue the previous month's review, once."""
    review = services.review_request_scheduled(today=timezone.localdate())
    return review.pk if review is not None else None
