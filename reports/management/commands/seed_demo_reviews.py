"""``manage.py seed_demo_reviews [--months 3]``: build the demo's monthly reviews from its
generated history (after seed_demo_workload; idempotent)."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from reports.models import MonthlyReview, ReviewStatus
from reports.services import month_window, previous_month, review_build, review_request


class Command(BaseCommand):
    help = (
        "Build the site-wide review of each of the last calendar months (three by default), "
        "as the monthly schedule would have. A month already built is left as it is."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--months", type=int, default=3, help="Months to build (1-24).")

    def handle(self, *args: Any, months: int, **options: Any) -> None:
        if not 1 <= months <= 24:
            raise CommandError("--months must be between 1 and 24.")
        day = timezone.localdate()
        for _n in range(months):
            year, month = previous_month(today=day)
            start, end = month_window(year=year, month=month)
            day = start.date()
            built = MonthlyReview.objects.filter(
                start=start, end=end, pool="", project="", status=ReviewStatus.DONE
            ).first()
            if built is not None:
                self.stdout.write(f"{built}: already built.")
                continue
            review = review_build(review_id=review_request(user=None, start=start, end=end).pk)
            if review.status != ReviewStatus.DONE:
                raise CommandError(f"{review}: the build failed: {review.error}")
            self.stdout.write(
                self.style.SUCCESS(f"{review}: built, {len(review.findings)} findings.")
            )
