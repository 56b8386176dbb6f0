"""``manage.py build_review --month YYYY-MM [--site | --project SLUG]``: build a past month's
review now, as a new version (the site's by default, or one project's)."""

import re
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from reports.models import ReviewStatus
from reports.services import month_window, review_build, review_request

MONTH = re.compile(r"^(\d{4})-(\d{2})$")


class Command(BaseCommand):
    help = (
        "Build the review of a past calendar month now (a new version; earlier versions stay "
        "frozen): the whole site by default, or one project's with --project."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--month", required=True, help="The month, as YYYY-MM.")
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument("--site", action="store_true", help="The whole site (the default).")
        scope.add_argument("--project", default="", help="One project's review (its slug).")

    def handle(self, *args: Any, month: str, project: str, **options: Any) -> None:
        found = MONTH.match(month.strip())
        if not found or not 1 <= int(found.group(2)) <= 12:
            raise CommandError(f"--month: {month!r} is not a month as YYYY-MM (e.g. 2026-11).")
        start, end = month_window(year=int(found.group(1)), month=int(found.group(2)))
        try:
            review = review_request(user=None, start=start, end=end, project=project.strip())
        except ValidationError as error:
            messages = (
                [f"{key}: {' '.join(value)}" for key, value in error.message_dict.items()]
                if hasattr(error, "error_dict")
                else error.messages
            )
            raise CommandError(" ".join(messages)) from None
        review = review_build(review_id=review.pk)
        if review.status != ReviewStatus.DONE:
            raise CommandError(f"{review}: the build failed: {review.error}")
        self.stdout.write(self.style.SUCCESS(f"{review}: built, {len(review.findings)} findings."))
