"""The demo builds three months of reviews from its generated history (idempotent)."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from governance import services as rules
from reports.models import MonthlyReview, ReviewStatus


@pytest.mark.django_db
def test_the_demo_builds_three_months_of_reviews_once():
    rules.demo_seed(password="pw")
    call_command("seed_demo_workload", "--days", "92", stdout=StringIO())
    out = StringIO()
    call_command("seed_demo_reviews", stdout=out)
    reviews = MonthlyReview.objects.order_by("start")
    assert [review.status for review in reviews] == [ReviewStatus.DONE] * 3
    assert all(review.requested_by is None for review in reviews)
    assert all(review.metrics["waits"]["overall"]["jobs"] > 0 for review in reviews)
    months = [(review.start.month, review.end.month) for review in reviews]
    assert all(end % 12 == (start + 1) % 12 for start, end in months)
    again = StringIO()
    call_command("seed_demo_reviews", stdout=again)
    assert again.getvalue().count("already built") == 3
    assert MonthlyReview.objects.count() == 3


@pytest.mark.django_db
def test_bad_months():
    with pytest.raises(CommandError, match="between"):
        call_command("seed_demo_reviews", "--months", "0")
