"""The grant lists read a page in a fixed number of queries, however many grants there are."""

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from governance import services
from governance.models import GrantKind, Terms
from tests.approvals.conftest import T0


def _grants(world, n: int) -> None:
    for i in range(n):
        services.grant_create(
            user=world.ops,
            reason="Approved request",
            project=world.vision,
            terms=Terms(
                kind=GrantKind.QUOTA_EXCEPTION,
                starts_at=T0 + timedelta(hours=i),
                ends_at=T0 + timedelta(days=1, hours=i),
                pool=world.training,
                flavor=world.a100,
                extra_gpus=1,
            ),
            now=T0 - timedelta(hours=1),
        )


def _queries(api_client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = api_client.get(url)
    assert response.status_code == 200, response.json()
    return len(queries)


def test_grant_lists_do_not_grow_with_the_rows(world, api_client):
    api_client.force_authenticate(world.ops)
    urls = [reverse("api_grant_list"), reverse("api_project_grant_list", args=["vision"])]
    _grants(world, 1)
    few = [_queries(api_client, url) for url in urls]
    _grants(world, 8)
    many = [_queries(api_client, url) for url in urls]
    assert many == few
    assert few[0] <= 3  # the page count, the page (its request id a subquery), the user
