"""Every list endpoint reads a page in a fixed number of queries, however many rows there are,
and a full first page of its largest rows stays under the page limit of ``bench/targets.py``.

The counts include the one query of token authentication (the token with its user). The rest:
``count`` for the paginator, the page itself, and one query per prefetched relation.
"""

import json

import pytest
from django.conf import settings
from django.urls import reverse

from bench.targets import MAX_PAGE_BYTES
from governance import services
from governance.models import ProjectRole, User
from tests.conftest import REASON

MORE = 10

LIST_QUERIES = [
    # route, queries, rows in the world, rows once MORE of each kind are added
    pytest.param("api_project_list", 3, 2, 2 + MORE, id="projects"),  # leads in the page's query
    pytest.param("api_flavor_list", 3, 2, 2 + MORE, id="flavors"),
    pytest.param("api_pool_list", 4, 2, 2 + 2 * MORE, id="pools"),  # + capacities
    pytest.param("api_tier_list", 4, 4, 4 + MORE, id="tiers"),  # + tiers it may preempt
    pytest.param("api_preemption_class_list", 3, 3, 3 + MORE, id="preemption-classes"),
    pytest.param("api_quota_list", 3, 2, 2 + 2 * MORE, id="quotas"),  # count kept
]
# Lists whose count is kept while their rows are unchanged (HistoryCountedPagination).
COUNT_KEPT = {"api_quota_list"}


def add_rules(world, n: int) -> None:
    """``n`` more of every kind, each with the relations the lists show."""
    kw = {"user": world.ops, "reason": REASON}
    for i in range(n):
        flavor = services.flavor_create(
            **kw, slug=f"l40s-{i}", name=f"L40S {i}", gpu_model="NVIDIA L40S", memory_gb=48
        )
        pool = services.pool_create(**kw, slug=f"pool-{i}", name=f"Pool {i}")
        child = services.pool_create(**kw, slug=f"pool-{i}-a", name=f"Pool {i} A", parent=pool)
        services.pool_capacity_set(**kw, pool=pool, flavor=flavor, gpus=16)
        services.pool_capacity_set(**kw, pool=pool, flavor=world.h100, gpus=2)
        services.pool_capacity_set(**kw, pool=child, flavor=flavor, gpus=4)
        services.tier_create(
            **kw,
            slug=f"tier-{i}",
            name=f"Tier {i}",
            score=41 + i,
            scheduler_value=410 + i,
            owner=world.ops,
            eligibility="Tests",
            confirmed_by="Ops",
            review_cycle_days=30,
            may_preempt=True,
            preemptible_tiers=[world.regular, world.exploratory],
        )
        lead = User.objects.create_user(username=f"lead-{i}")
        preemption_class = services.preemption_class_create(
            **kw,
            slug=f"class-{i}",
            name=f"Class {i}",
            kind="cautious",
            business_impact="Tests",
            recovery_owner=lead,
        )
        project = services.project_create(
            **kw, slug=f"project-{i}", name=f"Project {i}", tier=world.key
        )
        services.membership_set(**kw, project=project, member=lead, role=ProjectRole.LEAD)
        services.membership_set(**kw, project=project, member=world.ops, role=ProjectRole.MEMBER)
        services.quota_create(
            **kw,
            project=project,
            pool=pool,
            flavor=flavor,
            guarantee=8,
            borrow_limit=4,
            preemption_class=preemption_class,
        )
        services.quota_create(
            **kw,
            project=project,
            pool=world.training,
            flavor=world.h100,
            guarantee=1,
            preemption_class=world.allowed,
        )


@pytest.mark.parametrize(("route", "queries", "rows", "more_rows"), LIST_QUERIES)
def test_list_query_count_is_flat(
    world, api_client, ci_token, django_assert_num_queries, route, queries, rows, more_rows
):
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {ci_token.key}")
    url = reverse(route)
    # A token's first use in a minute records its last-used time (one write); counted below
    # are the requests after it.
    api_client.get(url)

    with django_assert_num_queries(queries):
        response = api_client.get(url)
    assert response.data["count"] == len(response.data["results"]) == rows

    add_rules(world, MORE)
    if route in COUNT_KEPT:
        # The count is kept while the rows are unchanged: the first read after a change
        # counts them again (one query more), the next ones read the newest history row only.
        with django_assert_num_queries(queries + 1):
            assert api_client.get(url).data["count"] == more_rows

    with django_assert_num_queries(queries):
        response = api_client.get(url)
    assert response.data["count"] == len(response.data["results"]) == more_rows


@pytest.mark.parametrize(("route", "queries", "rows", "more_rows"), LIST_QUERIES)
def test_a_full_first_page_stays_under_the_page_limit(
    world, api_client, ci_token, route, queries, rows, more_rows
):
    """A row says what it holds, not the rows beside it: a first page of ``PAGE_SIZE`` rows
    as large as the largest one here is under the limit (bench/pages.py measures the real
    first pages at 1,000 and 10,000 projects)."""
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {ci_token.key}")
    add_rules(world, MORE)
    response = api_client.get(reverse(route))
    results = response.json()["results"]
    assert len(results) == more_rows
    sizes = [len(json.dumps(row, separators=(",", ":")).encode()) for row in results]
    envelope = len(response.content) - sum(sizes)
    page_size = settings.REST_FRAMEWORK["PAGE_SIZE"]
    assert envelope + page_size * max(sizes) <= MAX_PAGE_BYTES, (max(sizes), envelope)


def test_each_filter_costs_one_lookup(world, api_client, ci_token, django_assert_num_queries):
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {ci_token.key}")
    params = {"project": "vision", "pool": "training", "flavor": "a100-80g"}
    api_client.get(reverse("api_quota_list"))  # the token's first use records it (one write)
    api_client.get(reverse("api_quota_list"), params)  # the count, kept after (COUNT_KEPT)

    with django_assert_num_queries(3 + len(params)):
        response = api_client.get(reverse("api_quota_list"), params)
    assert response.data["count"] == 1
