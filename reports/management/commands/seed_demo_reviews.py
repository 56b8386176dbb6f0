"""``manage.py seed_demo_reviews [--months 3]``: build the demo's monthly reviews from its
generated history (after seed_demo_workload; idempotent)."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reports.models import ReviewStatus
from reports.services import demo_reviews_seed


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
        for review, built in demo_reviews_seed(months=months):
            if not built:
                self.stdout.write(f"{review}: already built.")
            elif review.status != ReviewStatus.DONE:
                raise CommandError(f"{review}: the build failed: {review.error}")
            else:
                self.stdout.write(
                    self.style.SUCCESS(f"{review}: built, {len(review.findings)} findings.")
                )
