"""Who may open which rule page: every persona against every list, detail, history, create
and edit page; plus the query count of each list page, which must not grow with its rows."""

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from governance import services
from governance.models import PriorityTier, ProjectRole, Quota
from tests.conftest import REASON, World, login

PageArgs = Callable[[World], list[Any]]

READ_PAGES: list[tuple[str, PageArgs]] = [
    ("project_list", lambda w: []),
    ("project_detail", lambda w: [w.vision.slug]),
    ("project_history", lambda w: [w.vision.slug]),
    ("flavor_list", lambda w: []),
    ("flavor_detail", lambda w: [w.a100.slug]),
    ("flavor_history", lambda w: [w.a100.slug]),
    ("pool_list", lambda w: []),
    ("pool_detail", lambda w: [w.training.slug]),
    ("pool_history", lambda w: [w.training.slug]),
    ("tier_list", lambda w: []),
    ("tier_detail", lambda w: [w.production.slug]),
    ("tier_history", lambda w: [w.production.slug]),
    ("preemption_class_list", lambda w: []),
    ("preemption_class_detail", lambda w: [w.cautious.slug]),
    ("preemption_class_history", lambda w: [w.cautious.slug]),
    ("quota_list", lambda w: []),
    ("quota_detail", lambda w: [w.vision_a100.pk]),
    ("quota_history", lambda w: [w.vision_a100.pk]),
]

WRITE_PAGES: list[tuple[str, PageArgs]] = [
    ("project_create", lambda w: []),
    ("project_edit", lambda w: [w.vision.slug]),
    ("membership_edit", lambda w: [w.vision.slug]),
    ("flavor_create", lambda w: []),
    ("flavor_edit", lambda w: [w.a100.slug]),
    ("pool_create", lambda w: []),
    ("pool_edit", lambda w: [w.training.slug]),
    ("pool_capacity_edit", lambda w: [w.training.slug]),
    ("tier_create", lambda w: []),
    ("tier_edit", lambda w: [w.production.slug]),
    ("preemption_class_create", lambda w: []),
    ("preemption_class_edit", lambda w: [w.cautious.slug]),
    ("quota_create", lambda w: []),
    ("quota_edit", lambda w: [w.vision_a100.pk]),
]

# Pages addressed by an object: what an unknown slug or id looks like for each.
OBJECT_PAGES = [
    (name, ["no-such-thing"] if not name.startswith("quota") else [999999])
    for name, args in READ_PAGES + WRITE_PAGES
    if not name.endswith(("_list", "_create"))
]

SIGNED_IN = ["member", "lead", "approver", "ops", "outsider"]
NOT_OPS = ["member", "lead", "approver", "outsider"]


def _ids(pages: list[tuple[str, Any]]) -> list[str]:
    return [name for name, _args in pages]


def _client(request: pytest.FixtureRequest, persona: str) -> Client:
    return login(request.getfixturevalue(persona))


def _history_rows() -> int:
    return Quota.history.count() + PriorityTier.history.count()


@pytest.mark.parametrize(
    ("name", "args"), READ_PAGES + WRITE_PAGES, ids=_ids(READ_PAGES + WRITE_PAGES)
)
@pytest.mark.parametrize("method", ["get", "post"])
def test_anonymous_is_sent_to_sign_in(world, name, args, method):
    url = reverse(name, args=args(world))
    response = getattr(Client(), method)(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


@pytest.mark.parametrize("persona", SIGNED_IN)
@pytest.mark.parametrize(("name", "args"), READ_PAGES, ids=_ids(READ_PAGES))
def test_every_signed_in_user_reads_every_rule(request, world, persona, name, args):
    response = _client(request, persona).get(reverse(name, args=args(world)))
    assert response.status_code == 200
    assert b'<html lang="en">' in response.content


@pytest.mark.parametrize("persona", NOT_OPS)
@pytest.mark.parametrize(("name", "args"), WRITE_PAGES, ids=_ids(WRITE_PAGES))
def test_only_ops_may_open_a_write_page(request, world, persona, name, args):
    client = _client(request, persona)
    response = client.get(reverse(name, args=args(world)))
    assert response.status_code == 403
    assert b"Only ops may change the rules." in response.content


@pytest.mark.parametrize("persona", NOT_OPS)
@pytest.mark.parametrize(("name", "args"), WRITE_PAGES, ids=_ids(WRITE_PAGES))
def test_only_ops_may_post_a_change(request, world, persona, name, args):
    client = _client(request, persona)
    before = _history_rows()
    response = client.post(
        reverse(name, args=args(world)),
        {"guarantee": 1, "name": "Renamed", "score": 99, "reason": "Sneaky", "action": "set"},
    )
    assert response.status_code == 403
    assert _history_rows() == before


@pytest.mark.parametrize(("name", "args"), WRITE_PAGES, ids=_ids(WRITE_PAGES))
def test_ops_opens_every_write_page(ops_client, world, name, args):
    response = ops_client.get(reverse(name, args=args(world)))
    assert response.status_code == 200
    assert re.search(rb'<textarea name="([a-z]+-)?reason"', response.content)


@pytest.mark.parametrize(("name", "args"), READ_PAGES, ids=_ids(READ_PAGES))
def test_ops_sees_edit_and_create_buttons_others_do_not(ops_client, member, world, name, args):
    url = reverse(name, args=args(world))
    if name.endswith("_list"):
        target = reverse(name.replace("_list", "_create"))
    else:
        target = reverse(name.rsplit("_", 1)[0] + "_edit", args=args(world))
    assert f'href="{target}'.encode() in ops_client.get(url).content
    assert f'href="{target}'.encode() not in login(member).get(url).content


@pytest.mark.parametrize(("name", "args"), OBJECT_PAGES, ids=_ids(OBJECT_PAGES))
@pytest.mark.parametrize("persona", ["ops", "member"])
def test_unknown_object_is_not_found(request, world, persona, name, args):
    response = _client(request, persona).get(reverse(name, args=args))
    assert response.status_code == 404


def test_detail_and_history_share_a_tab_bar(member, world):
    client = login(member)
    detail = reverse("tier_detail", args=[world.production.slug])
    history = reverse("tier_history", args=[world.production.slug])
    for url in (detail, history):
        content = client.get(url).content.decode()
        assert f'href="{detail}"' in content
        assert f'href="{history}"' in content
    assert f'href="{history}" aria-current="page"' in client.get(history).content.decode()


# --- query counts -------------------------------------------------------------------------

LIST_PAGES = [name for name, _args in READ_PAGES if name.endswith("_list")]

# Queries per list page: session, user (the paginator's count only when the first page does
# not hold the whole list, as here it does), then the page's own (see each selector) and the
# menus of its filter form (short lists: tiers, pools, flavors, classes; the long ones,
# projects and users, search as you type and cost nothing here).
LIST_QUERIES = {
    "project_list": 4,  # projects (with their leads), the tier menu (with the default tier)
    "flavor_list": 3,
    # The fingerprint of the rows kept (governance/views/_kept.py), then, the first time,
    # pools, their capacities with flavors, the parent menu.
    "pool_list": 6,
    "tier_list": 4,  # tiers, the tiers each may preempt
    "preemption_class_list": 3,
    "quota_list": 6,  # quotas, the pool, flavor and preemption class menus
}


def _grow(world: World, count: int) -> None:
    """``count`` more of every kind: projects with members and quotas, flavors, pools, tiers."""
    ops = world.ops
    kw: dict[str, Any] = {"user": ops, "reason": REASON}
    for index in range(count):
        flavor = services.flavor_create(
            **kw, slug=f"extra-{index}", name=f"Extra {index}", gpu_model="L40S", memory_gb=48
        )
        pool = services.pool_create(
            **kw, slug=f"extra-{index}", name=f"Extra {index}", parent=world.training
        )
        services.pool_capacity_set(**kw, pool=world.training, flavor=flavor, gpus=8)
        services.pool_capacity_set(**kw, pool=pool, flavor=flavor, gpus=8)
        services.tier_create(
            **kw,
            slug=f"extra-{index}",
            name=f"Extra {index}",
            score=80 + index,
            scheduler_value=800 + index,
            owner=ops,
            eligibility="Tests",
            confirmed_by="Ops",
            review_cycle_days=30,
            may_preempt=index == 0,
            preemptible_tiers=[world.exploratory] if index == 0 else [],
        )
        services.preemption_class_create(
            **kw,
            slug=f"extra-{index}",
            name=f"Extra {index}",
            kind="allowed",
            business_impact="Tests",
        )
        project = services.project_create(
            **kw, slug=f"extra-{index}", name=f"Extra {index}", tier=world.regular
        )
        services.membership_set(**kw, project=project, member=world.ops, role=ProjectRole.LEAD)
        services.quota_create(
            **kw,
            project=project,
            pool=pool,
            flavor=flavor,
            guarantee=4,
            preemption_class=world.allowed,
        )


@pytest.mark.parametrize("name", LIST_PAGES)
def test_list_page_queries_do_not_grow_with_rows(
    ops_client, world, django_assert_num_queries, name
):
    url = reverse(name)
    with django_assert_num_queries(LIST_QUERIES[name]):
        assert ops_client.get(url).status_code == 200
    _grow(world, 8)
    with django_assert_num_queries(LIST_QUERIES[name]):
        response = ops_client.get(url)
    assert response.status_code == 200
    assert b"Extra 7" in response.content


def test_quota_list_filters(member, world):
    client = login(member)
    url = reverse("quota_list")
    by_project = client.get(url, {"project": "speech"})
    assert reverse("quota_detail", args=[world.speech_a100.pk]).encode() in by_project.content
    assert reverse("quota_detail", args=[world.vision_a100.pk]).encode() not in by_project.content
    by_pool = client.get(url, {"pool": "inference"})
    assert b"No quotas." in by_pool.content
    unknown = client.get(url, {"project": "nope", "flavor": world.a100.slug})
    assert unknown.status_code == 400  # a form error on the page, and no guessed rows
    assert "Nothing is named “nope”".encode() in unknown.content
    assert reverse("quota_detail", args=[world.vision_a100.pk]).encode() not in unknown.content


def test_search_narrows_a_list(member, world):
    client = login(member)
    response = client.get(reverse("project_list"), {"q": "visi"})
    assert b">Vision<" in response.content
    assert b">Speech<" not in response.content


def test_the_pool_list_is_kept_until_a_pool_capacity_or_quota_changes(
    ops_client, world, member, django_assert_num_queries
):
    """Read again with the same filters, the pool list costs the session, the user and the
    fingerprint of its rows; a write of what it shows (here a capacity, a new pool) is on the
    next request; each filter, and a reader who may not edit, has its own page."""
    url = reverse("pool_list")
    first = ops_client.get(url)
    with django_assert_num_queries(3):
        again = ops_client.get(url)
    # The same page but for the CSRF token (masked anew on each request).
    token = re.compile(rb'value="[A-Za-z0-9]{64}"|content="[A-Za-z0-9]{64}"')
    assert token.sub(b"", again.content) == token.sub(b"", first.content)
    kw: dict[str, Any] = {"user": world.ops, "reason": REASON}
    services.pool_capacity_set(**kw, pool=world.training, flavor=world.a100, gpus=4242)
    assert b"4242" in ops_client.get(url).content
    services.pool_create(**kw, slug="lab", name="Lab", parent=world.training)
    lab = reverse("pool_detail", args=["lab"]).encode()
    assert lab in ops_client.get(url).content
    assert lab not in ops_client.get(url, {"q": "train"}).content
    assert ops_client.get(url, {"parent": "ghost"}).status_code == 400
    reader = login(member).get(url).content.decode()
    assert reverse("pool_create") not in reader
    assert reverse("pool_create") in ops_client.get(url).content.decode()
