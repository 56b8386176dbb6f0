"""``manage.py build_review --month YYYY-MM [--site | --project SLUG]``."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from reports.models import MonthlyReview, ReviewStatus

pytestmark = pytest.mark.django_db


def test_builds_a_past_months_site_review_then_a_new_version(world):
    out = StringIO()
    call_command("build_review", "--month", "2026-10", stdout=out)
    call_command("build_review", "--month", "2026-10", "--site", stdout=out)
    reviews = list(MonthlyReview.objects.order_by("version"))
    assert [r.version for r in reviews] == [1, 2]
    assert all(r.status == ReviewStatus.DONE and r.project == "" for r in reviews)
    assert reviews[0].start.month == 10 and reviews[0].end.month == 11
    assert "built" in out.getvalue()


def test_builds_one_projects_review(world):
    call_command("build_review", "--month", "2026-09", "--project", "vision", stdout=StringIO())
    review = MonthlyReview.objects.get()
    assert review.project == "vision" and review.status == ReviewStatus.DONE


@pytest.mark.parametrize(
    "args, message",
    [
        (["--month", "2026-13"], "not a month"),
        (["--month", "Nov"], "not a month"),
        (["--month", "2999-01"], "has not ended"),
        (["--month", "2026-10", "--project", "nope"], "No project"),
    ],
)
def test_bad_input_is_a_clear_error_and_builds_nothing(world, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("build_review", *args, stdout=StringIO())
    assert not MonthlyReview.objects.exists()
