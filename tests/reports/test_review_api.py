"""A built monthly review's figures and its CSV through the API, with a token of scope
``read``: the same tables as the page; 404 before it is built; 403 for who may not read it."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from governance.models import TokenScope
from reports.models import MonthlyReview
from reports.selectors.stored_reviews import review_tables
from tests.conftest import token_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def review(world):
    call_command("build_review", "--month", "2026-10", stdout=StringIO())
    return MonthlyReview.objects.get()


def client_for(user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=token_for(user, TokenScope.READ))
    return client


def test_the_figures_are_the_pages_tables(review, ops):
    response = client_for(ops).get(reverse("api_monthly_review", args=[review.pk]))
    assert response.status_code == 200, response.content[:500]
    body = response.json()
    tables = review_tables(metrics=review.metrics)
    assert set(body["tables"]) == set(tables)
    for key, table in tables.items():
        assert body["tables"][key]["columns"] == [str(c) for c in table.columns]
        assert len(body["tables"][key]["rows"]) == len(table.rows)
    assert body["version"] == 1 and body["start"].startswith("2026-10-01")


def test_the_csv_downloads_with_a_read_token(review, ops):
    response = client_for(ops).get(reverse("api_monthly_review_csv", args=[review.pk]))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response.content.decode("utf-8-sig").strip()


def test_who_may_not_read_it_is_refused(review, member):
    response = client_for(member).get(reverse("api_monthly_review", args=[review.pk]))
    assert response.status_code == 403
    assert APIClient().get(reverse("api_monthly_review", args=[review.pk])).status_code in (
        401,
        403,
    )
    assert client_for(member).get(reverse("api_monthly_review", args=[999])).status_code == 404
