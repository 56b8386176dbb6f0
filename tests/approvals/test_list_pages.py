"""The grants and notification pages are paginated and read a page in a fixed number of
queries; the inbox API pages like every other list."""

import re

import pytest
from django.urls import reverse

from tests.approvals.test_pages import _many
from tests.conftest import login, token_for


@pytest.mark.parametrize(
    ("name", "args", "persona", "queries"),
    [
        # session, user, the project, its grants, the requests that made them
        ("project_grants", ["vision"], "ops", 5),
        # session, user, whether the member leads a project (the header's "Lead" badge),
        # the paginator's count (not while the first page holds them all), a page of them
        ("notification_list", [], "lead", 5),
    ],
)
def test_grant_and_notification_pages_cost_a_fixed_number_of_queries(
    request, world, policies, lead, ops, django_assert_num_queries, name, args, persona, queries
):
    client = login(request.getfixturevalue(persona))
    _many(world, lead, ops, 1)
    client.get(reverse(name, args=args))
    # A paginated first page that holds the whole list is not counted (one query fewer).
    with django_assert_num_queries(queries - (name == "notification_list")):
        first = client.get(reverse(name, args=args), {"size": 25})
    _many(world, lead, ops, 14)
    with django_assert_num_queries(queries):
        response = client.get(reverse(name, args=args), {"size": 25})
    assert response.status_code == first.status_code == 200
    key = "grants" if name == "project_grants" else "notifications"
    listing = response.context[key]
    assert listing.count > first.context[key].count
    assert len(listing) == min(listing.count, 25)
    if listing.count > 25:
        assert listing.next_url == "?size=25&page=2"


def test_the_inbox_api_is_paged(world, policies, lead, ops, api_client):
    _many(world, lead, ops, 3)
    api_client.credentials(HTTP_AUTHORIZATION=token_for(ops))
    first = api_client.get(reverse("api_inbox"), {"limit": 2}).json()
    assert first["count"] > 2 and len(first["results"]) == 2
    assert re.search(r"offset=2", first["next"])
