"""List pages and their APIs share one selector: the same filters, sort and rows; pages are
paginated with the filters kept in every link; bad filters are form errors on the page and a
400 naming the parameter in the API; the lists embedded in detail pages are paginated too and
cost a fixed number of queries; user and project filters search as you type."""

import pytest
from django.urls import reverse

from governance import selectors, services
from governance.apis.lookup import LookupPagination
from governance.models import GpuFlavor, Pool, Quota, User
from governance.selectors import QUOTA_SORTS, quota_list
from tests.conftest import REASON, login, token_for
from tests.governance.test_pages import _grow


def _projects(world, count: int, start: int = 0) -> None:
    """``count`` more projects on the regular tier, each with a quota of A100 in training."""
    kw = {"user": world.ops, "reason": REASON}
    for index in range(start, start + count):
        project = services.project_create(
            **kw, slug=f"many-{index:03d}", name=f"Many {index:03d}", tier=world.regular
        )
        services.quota_create(
            **kw,
            project=project,
            pool=world.training,
            flavor=world.a100,
            guarantee=0,
            preemption_class=world.allowed,
        )


# page route, API route, the page's context name, the API's key per row, filters to try
PARITY = [
    (
        "project_list",
        "api_project_list",
        "projects",
        "slug",
        [
            {"sort": "-name"},
            {"q": "extra"},
            {"tier": "regular", "sort": "slug"},
            {"member": "ops", "sort": "-guaranteed_gpus"},
        ],
    ),
    (
        "quota_list",
        "api_quota_list",
        "quotas",
        "id",
        [
            {"sort": "pool"},
            {"pool": "training", "sort": "-guarantee"},
            {"project": "vision"},
            {"preemption_class": "allowed", "flavor": "a100-80g"},
        ],
    ),
    (
        "pool_list",
        "api_pool_list",
        "pools",
        "slug",
        [{"sort": "-project_count"}, {"parent": "training"}, {"q": "extra-1"}],
    ),
    ("flavor_list", "api_flavor_list", "flavors", "slug", [{"sort": "-total_gpus"}, {"q": "l40s"}]),
    (
        "tier_list",
        "api_tier_list",
        "tiers",
        "slug",
        [
            {"sort": "name"},
            {"may_preempt": "true"},
            {"is_default": "false", "sort": "score"},
            {"q": "extra"},
        ],
    ),
    (
        "preemption_class_list",
        "api_preemption_class_list",
        "preemption_classes",
        "slug",
        [{"sort": "kind"}, {"kind": "allowed"}, {"q": "extra"}],
    ),
]


def _key(row, key):
    return row[key] if isinstance(row, dict) else getattr(row, "pk" if key == "id" else key)


@pytest.mark.parametrize(
    ("page", "api", "name", "key", "cases"), PARITY, ids=[case[0] for case in PARITY]
)
def test_page_and_api_show_the_same_rows_in_the_same_order(
    world, ops, api_client, page, api, name, key, cases
):
    _grow(world, 3)
    client = login(ops)
    api_client.force_authenticate(ops)
    for params in [{}, *cases]:
        shown = client.get(reverse(page), {**params, "size": 25})
        assert shown.status_code == 200, params
        answered = api_client.get(reverse(api), {**params, "limit": 25})
        assert answered.status_code == 200, params
        page_rows = [_key(row, key) for row in shown.context[name]]
        api_rows = [_key(row, key) for row in answered.data["results"]]
        assert page_rows == api_rows, params
        assert shown.context[name].count == answered.data["count"], params


# page route, API route, a bad parameter, its value
BAD_FILTERS = [
    ("project_list", "api_project_list", "tier", "no-such-tier"),
    ("project_list", "api_project_list", "member", "ghost"),
    ("project_list", "api_project_list", "q", "x" * 101),
    ("project_list", "api_project_list", "sort", "password"),
    ("quota_list", "api_quota_list", "project", "ghost"),
    ("quota_list", "api_quota_list", "pool", "ghost"),
    ("quota_list", "api_quota_list", "flavor", "ghost"),
    ("quota_list", "api_quota_list", "preemption_class", "ghost"),
    ("quota_list", "api_quota_list", "sort", "-project__lead__password"),
    ("pool_list", "api_pool_list", "parent", "ghost"),
    ("pool_list", "api_pool_list", "sort", "x"),
    ("flavor_list", "api_flavor_list", "q", "x" * 101),
    ("flavor_list", "api_flavor_list", "sort", "x"),
    ("tier_list", "api_tier_list", "due_before", "tomorrow"),
    ("tier_list", "api_tier_list", "sort", "x"),
    ("preemption_class_list", "api_preemption_class_list", "kind", "sometimes"),
    ("preemption_class_list", "api_preemption_class_list", "sort", "x"),
    ("change_list", "api_change_list", "status", "x"),
    ("change_list", "api_change_list", "object", "nope:1"),
    ("change_list", "api_change_list", "author", "ghost"),
    ("change_list", "api_change_list", "since", "x"),
    ("change_list", "api_change_list", "sort", "x"),
    ("request_list", "api_request_list", "state", "x"),
    ("request_list", "api_request_list", "project", "ghost"),
    ("request_list", "api_request_list", "requester", "ghost"),
    ("request_list", "api_request_list", "sort", "x"),
]


@pytest.mark.parametrize(("page", "api", "param", "value"), BAD_FILTERS)
def test_a_bad_filter_is_a_form_error_on_the_page_and_a_400_naming_it_in_the_api(
    world, member, api_client, page, api, param, value
):
    response = login(member).get(reverse(page), {param: value})
    assert response.status_code == 400
    assert list(response.context["filter_form"].errors) == [param]
    assert 'class="field__error"' in response.content.decode()
    api_client.force_authenticate(member)
    answered = api_client.get(reverse(api), {param: value})
    assert answered.status_code == 400
    assert list(answered.data["fields"]) == [param]


def test_pages_keep_the_filters_in_every_link(world, ops):
    client = login(ops)
    _projects(world, 26)
    # With more rows than a page: the numbers and next link keep the filters.
    response = client.get(reverse("project_list"), {"tier": "regular", "size": 25, "sort": "slug"})
    listing = response.context["projects"]
    assert listing.count == 26 and len(listing) == 25
    assert listing.next_url == "?tier=regular&size=25&sort=slug&page=2"
    html = response.content.decode()
    assert 'href="?tier=regular&amp;size=25&amp;sort=slug&amp;page=2"' in html
    assert 'href="?tier=regular&amp;size=50&amp;sort=slug"' in html  # another size: page 1
    second = client.get(reverse("project_list"), {"tier": "regular", "size": 25, "page": 2})
    assert len(second.context["projects"]) == 1
    # A page number past the end shows the last page; a size not offered is the default.
    past_end = client.get(reverse("project_list"), {"page": 99, "size": 25})
    assert len(past_end.context["projects"]) == 28 - 25  # vision, speech and 26 more
    huge = client.get(reverse("project_list"), {"size": 100000})
    assert huge.context["projects"].page.paginator.per_page == 50


# detail page, its args (from the world), the queries of its page
EMBEDDED = [
    # session, user, the object, its usage or relations, its latest changes, the quotas'
    # count and page (or the projects' count and page, their leads read in the page's query)
    ("pool_detail", "training", 9),
    ("flavor_detail", "a100-80g", 8),
    ("preemption_class_detail", "allowed", 6),
    ("tier_detail", "regular", 9),
]


@pytest.mark.parametrize(("name", "slug", "queries"), EMBEDDED)
def test_lists_embedded_in_detail_pages_are_paginated_and_flat(
    world, ops, django_assert_num_queries, name, slug, queries
):
    client = login(ops)
    url = reverse(name, args=[slug])
    _projects(world, 1)
    client.get(url)  # fills the content type cache, as any earlier request would
    # A first page that holds the whole list is not counted again: one query fewer.
    with django_assert_num_queries(queries - 1):
        first = client.get(url, {"size": 25})
    _projects(world, 30, start=1)
    with django_assert_num_queries(queries):
        response = client.get(url, {"size": 25})
    assert response.status_code == first.status_code == 200
    listing = response.context["quotas" if name != "tier_detail" else "projects"]
    assert listing.count > 25 and len(listing) == 25
    assert listing.next_url is not None


def test_history_pages_are_paginated(world, ops):
    for weight in range(2, 30):
        services.quota_update(
            quota=world.vision_a100, user=ops, reason=REASON, data={"fair_share_weight": weight}
        )
    client = login(ops)
    response = client.get(reverse("quota_history", args=[world.vision_a100.pk]), {"size": 25})
    [(_title, entries)] = response.context["sections"]
    assert entries.count == 29 and len(entries) == 25
    last = client.get(
        reverse("quota_history", args=[world.vision_a100.pk]), {"size": 25, "page": 2}
    )
    [(_title, entries)] = last.context["sections"]
    rows = list(entries)
    assert len(rows) == 4 and rows[-1].action == "created"
    # Each row is diffed against the one before it, whichever page that one is on.
    assert [(change.old, change.new) for change in rows[0].changes] == [("3", "4")]
    assert [(change.old, change.new) for change in rows[2].changes] == [("3", "2")]  # created at 3


# --- search as you type -------------------------------------------------------------------


def test_the_lookup_finds_users_and_projects_as_you_type(world, member, api_client):
    for index in range(30):
        User.objects.create_user(username=f"zed-{index:02d}", first_name="Zed")
    api_client.force_authenticate(member)
    url = reverse("api_lookup", args=["users"])
    found = api_client.get(url, {"q": "zed-0"}).data
    assert found["count"] == 10
    assert [row["value"] for row in found["results"]] == [f"zed-{i:02d}" for i in range(10)]
    assert found["results"][0]["label"] == "Zed (zed-00)"  # the name, and who it is
    capped = api_client.get(url, {"q": "Zed", "limit": 1000}).data
    assert capped["count"] == 30 and len(capped["results"]) == 20  # never more than 20
    projects = api_client.get(reverse("api_lookup", args=["projects"]), {"q": "vis"}).data
    assert projects["results"] == [{"value": "vision", "label": "Vision"}]
    by_name = api_client.get(reverse("api_lookup", args=["projects"]), {"q": "peec"}).data
    assert [row["value"] for row in by_name["results"]] == ["speech"]


def test_the_user_lookup_matches_the_start_of_a_username_or_name(
    world, member, api_client, django_assert_num_queries
):
    """A prefix of the username, the first or the last name (an index finds and counts
    those at any number of users), in any case; not a part inside a name."""
    User.objects.create_user(username="mlin", first_name="Mei", last_name="Lindqvist")
    User.objects.create_user(username="old-lin", last_name="Lin", is_active=False)
    api_client.force_authenticate(member)
    url = reverse("api_lookup", args=["users"])
    for q in ("mli", "MEI", "lindq"):
        assert [row["value"] for row in api_client.get(url, {"q": q}).data["results"]] == [
            "mlin"
        ], q
    assert api_client.get(url, {"q": "dqvist"}).data["count"] == 0  # inside a name
    assert api_client.get(url, {"q": "lin"}).data["count"] == 1  # active users only
    # the count and the page, whatever the number of users
    with django_assert_num_queries(2):
        api_client.get(url, {"q": "m"})


def test_the_lookup_counts_matches_up_to_a_bound(world, member, api_client, monkeypatch):
    """A short prefix may match every user: the count stops at ``max_count`` (1,000; 5 here)
    so that it never reads the whole table; the suggestions are the first matches still."""
    monkeypatch.setattr(LookupPagination, "max_count", 5)
    User.objects.bulk_create([User(username=f"bulk-{index:02d}") for index in range(8)])
    api_client.force_authenticate(member)
    found = api_client.get(reverse("api_lookup", args=["users"]), {"q": "bulk", "limit": 3}).data
    assert found["count"] == 5
    assert [row["value"] for row in found["results"]] == ["bulk-00", "bulk-01", "bulk-02"]
    assert found["next"] is not None


def test_the_lookup_is_for_signed_in_users_and_known_kinds(world, member, api_client):
    url = reverse("api_lookup", args=["users"])
    assert api_client.get(url, {"q": "a"}).status_code == 401
    api_client.credentials(HTTP_AUTHORIZATION=token_for(member))
    assert api_client.get(reverse("api_lookup", args=["grants"])).status_code == 404
    too_long = api_client.get(url, {"q": "x" * 101})
    assert too_long.status_code == 400 and list(too_long.data["fields"]) == ["q"]
    member.is_active = False
    member.save()
    assert api_client.get(url, {"q": "a"}).status_code == 401


def test_user_and_project_filters_are_text_inputs_that_search_as_you_type(world, member):
    for index in range(50):
        User.objects.create_user(username=f"many-{index}")
    html = login(member).get(reverse("change_list")).content.decode()
    lookup = reverse("api_lookup", args=["users"])
    assert 'name="author"' in html and f'data-lookup="{lookup}"' in html
    assert "many-49" not in html  # no menu of every user
    assert "js/lookup.js" in html
    assert "<script>" not in html.split("<main")[1] if "<main" in html else True
    quotas = login(member).get(reverse("quota_list"), {"project": "vision"}).content.decode()
    assert f'data-lookup="{reverse("api_lookup", args=["projects"])}"' in quotas
    assert 'value="vision"' in quotas  # the filter keeps what was typed


# --- pages read their keys first ------------------------------------------------------------


@pytest.mark.parametrize("sort", ["project", "pool", "-guarantee", "next_review_on"])
def test_a_page_of_quotas_is_the_slice_of_the_sorted_list(world, sort, django_assert_num_queries):
    """The quota list picks a page's keys in a subquery (``KeysFirstQuerySet``): the same
    rows in the same order as slicing the plainly sorted list, in one query."""
    _grow(world, 6)
    plain = list(Quota.objects.order_by(*QUOTA_SORTS[sort][1]))
    assert len(plain) > 6
    for start, stop in [(0, 4), (3, 7), (5, 50)]:
        with django_assert_num_queries(1):
            page = list(quota_list(sort=sort)[start:stop])
        assert page == plain[start:stop]
        assert [q.project.name for q in page] == [q.project.name for q in plain[start:stop]]
    assert list(quota_list(sort=sort)) == plain
    assert quota_list(sort=sort)[2] == plain[2]


def test_pool_usage_narrowed_to_a_pool_or_flavor_is_that_part_of_the_whole(world):
    """Pages about one pool or flavor sum only its quotas: the same figures as the whole."""
    _grow(world, 3)
    whole = selectors.pool_usage()
    assert any(use.child_capacity for use in whole)  # child pools are counted
    for pool in Pool.objects.all():
        assert selectors.pool_usage(pool=pool) == [u for u in whole if u.pool == pool]
    for flavor in GpuFlavor.objects.all():
        assert selectors.pool_usage(flavor=flavor) == [u for u in whole if u.flavor == flavor]
    quota = Quota.objects.first()
    assert quota is not None
    assert selectors.pool_usage(pool=quota.pool, flavor=quota.flavor) == [
        u for u in whole if u.pool == quota.pool and u.flavor == quota.flavor
    ]
