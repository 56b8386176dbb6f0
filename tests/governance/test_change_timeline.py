"""The timeline of rule changes: a page and an API with filters, each change with its diff,
a per-object timeline on detail pages; the query counts do not grow with the changes."""

import pytest
from django.test import Client
from django.urls import reverse

from governance import services
from governance.models import RuleChange
from governance.services import EditSpec
from tests.conftest import login

pytestmark = pytest.mark.django_db


def _changes(world, ops2, count: int, start: int = 0) -> list[RuleChange]:
    """``count`` applied changes on quotas, tiers, pools and members, one rolled back."""
    made = []
    for index in range(start, start + count):
        edits = [
            [EditSpec(target=world.vision_a100, field="fair_share_weight", value=4 + index)],
            [EditSpec(target=world.key, field="max_gpus_total", value=40 + index)],
            [EditSpec(target=world.inference, field="capacity", key=world.h100, value=index + 1)],
            [
                EditSpec(
                    target=world.speech, field="tier", value=[world.key, world.regular][index % 2]
                )
            ],
            [EditSpec(target=world.cautious, field="min_runtime_minutes", value=60 + index)],
        ][index % 5]
        change = services.rule_change_create(
            user=world.ops,
            reason=f"Step {index}",
            edits=edits,
            observation_days=0,
            title=f"Step {index}",
        )
        services.rule_change_approve(change=change, user=ops2)
        made.append(services.rule_change_apply(change=change, user=world.ops))
    undo = made[0] if start == 0 else made[-1]  # a change no later one touched again
    rollback = services.rule_change_rollback(change=undo, user=world.ops, reason="Undo")
    made.append(rollback)
    return made


# session, user, then (no count: the first page holds every change here) the page of
# changes with their people, the edits with their content types, one query per kind of
# object edited (quota with its project, pool and flavor; preemption class; project; pool;
# tier), one per kind of related value named (tier, flavor). The author filter searches as
# you type: it lists no users.
TIMELINE_QUERIES = 11


def test_timeline_page_shows_each_diff_and_queries_do_not_grow(
    world, ops2, django_assert_num_queries
):
    _changes(world, ops2, 5)
    client = login(world.ops)
    url = reverse("change_list")
    with django_assert_num_queries(TIMELINE_QUERIES):
        text = client.get(url).content.decode()
    assert text.count('class="timeline__entry timeline__entry--change') == 6
    assert "Roll back #" in text
    assert '<td class="changes__old">3</td>' in text  # fair-share weight 3 → 4
    _changes(world, ops2, 10, start=5)
    with django_assert_num_queries(TIMELINE_QUERIES):
        text = client.get(url).content.decode()
    assert text.count('class="timeline__entry timeline__entry--change') == 17


def test_timeline_filters(world, ops2, member):
    made = _changes(world, ops2, 5)
    client = login(member)
    url = reverse("change_list")

    def ids(**params) -> set[int]:
        text = client.get(url, params).content.decode()
        return {change.pk for change in made if f'href="/changes/{change.pk}/"' in text}

    assert ids(kind="capacity") == {made[2].pk}
    assert ids(object=f"quota:{world.vision_a100.pk}") == {made[0].pk, made[5].pk}
    assert ids(object="tier:key") == {made[1].pk}
    assert ids(status="proposed") == {made[5].pk}
    assert ids(author="ops2") == set()
    assert ids(author="ops", since="2000-01-01") == {change.pk for change in made}
    assert ids(until="2000-01-01") == set()
    # Bad values are form errors on the page (a 400 naming each field), never a server error.
    bad = client.get(url, {"object": "nope:1", "status": "x", "since": "x", "author": "ghost"})
    assert bad.status_code == 400
    assert set(bad.context["filter_form"].errors) == {"object", "status", "since", "author"}
    assert "No such object" in bad.content.decode()


def test_per_object_timeline_on_the_detail_page(world, ops2, member):
    made = _changes(world, ops2, 2)
    text = login(member).get(reverse("quota_detail", args=[world.vision_a100.pk])).content.decode()
    section = text.split('id="changes"')[1]
    assert f"#{made[0].pk} Step 0" in section
    assert f"#{made[1].pk} " not in section
    assert f"?object=quota:{world.vision_a100.pk}" in text
    tier = login(member).get(reverse("tier_detail", args=["key"])).content.decode()
    assert f"#{made[1].pk} Step 1" in tier.split('id="changes"')[1]


# The API: the token (with its user), then the same queries as the page, less the filter form.
API_QUERIES = 11


def test_api_lists_changes_with_filters_and_fixed_queries(
    world, ops2, ci_token, api_client, django_assert_num_queries
):
    made = _changes(world, ops2, 5)
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {ci_token.key}")
    url = reverse("api_change_list")
    api_client.get(url)  # the token's first use in a minute records it (one write)
    with django_assert_num_queries(API_QUERIES):
        body = api_client.get(url).json()
    assert body["count"] == 6
    newest = body["results"][0]
    assert newest["id"] == made[5].pk and newest["rollback_of"] == made[0].pk
    assert newest["status"] == "proposed"
    assert newest["edits"] == [
        {
            "object_type": "quota",
            "object": str(world.vision_a100.pk),
            "object_name": "Vision · Training · A100 80G",
            "field": "fair_share_weight",
            "field_label": "Fair-share weight",
            "key": None,
            "kind": "quota",
            "old": 4,
            "new": 3,
            "old_display": "4",
            "new_display": "3",
        }
    ]
    _changes(world, ops2, 10, start=5)
    with django_assert_num_queries(API_QUERIES):
        assert api_client.get(url).json()["count"] == 17

    capacity = api_client.get(url, {"kind": "capacity"}).json()["results"]
    assert {change["id"] for change in capacity} >= {made[2].pk}
    assert capacity[-1]["edits"][0]["old_display"] == "0"
    by_object = api_client.get(url, {"object": "tier:key"}).json()
    assert all(
        edit["object"] == "key" for change in by_object["results"] for edit in change["edits"]
    )
    bad = api_client.get(url, {"object": "tier:nope", "status": "maybe", "since": "soon"})
    assert bad.status_code == 400
    assert set(bad.json()["fields"]) == {"object", "status", "since"}

    detail = api_client.get(reverse("api_change_detail", args=[made[1].pk])).json()
    assert detail["edits"][0]["field"] == "max_gpus_total"
    assert api_client.get(reverse("api_change_detail", args=[999999])).status_code == 404


def test_api_propose_approve_apply_and_rollback(world, ops2, api_client):
    api_client.force_authenticate(world.ops)
    response = api_client.post(
        reverse("api_change_propose"),
        {
            "reason": "Speech runs at the key tier for the launch",
            "ticket": "OPS-42",
            "rollback_condition": "Key work waits longer than 10 minutes",
            "edits": [
                {"object_type": "project", "object": "speech", "field": "tier", "value": "key"}
            ],
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    change = response.json()
    assert change["status"] == "proposed" and change["ticket"] == "OPS-42"
    assert change["edits"][0]["new_display"] == "Key project"

    assert api_client.post(reverse("api_change_apply", args=[change["id"]])).status_code == 400
    api_client.force_authenticate(ops2)
    approved = api_client.post(reverse("api_change_approve", args=[change["id"]]), {})
    assert approved.json()["approved_by"] == "ops2"
    applied = api_client.post(reverse("api_change_apply", args=[change["id"]]))
    assert applied.status_code == 200 and applied.json()["status"] == "applied"
    world.speech.refresh_from_db()
    assert world.speech.tier == world.key
    again = api_client.post(reverse("api_change_apply", args=[change["id"]]))
    assert again.status_code == 400
    assert again.json()["fields"] == {
        "non_field_errors": [f"Change #{change['id']} was already applied."]
    }

    rollback = api_client.post(
        reverse("api_change_rollback", args=[change["id"]]),
        {"reason": "Launch is over"},
        format="json",
    )
    assert rollback.status_code == 201
    assert rollback.json()["rollback_of"] == change["id"]
    assert rollback.json()["edits"][0]["new_display"] == "—"


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ({"object_type": "quota", "object": "999", "field": "guarantee", "value": 1}, "object"),
        ({"object_type": "quota", "object": "1", "field": "project", "value": "x"}, "value"),
        ({"object_type": "pool", "object": "training", "field": "capacity", "value": 1}, "key"),
        ({"object_type": "robot", "object": "x", "field": "x", "value": 1}, "object_type"),
    ],
)
def test_api_propose_bad_input_is_a_400_naming_the_field(world, api_client, edit, field):
    api_client.force_authenticate(world.ops)
    edit = {**edit, "object": str(world.vision_a100.pk)} if edit["object"] == "1" else edit
    response = api_client.post(
        reverse("api_change_propose"), {"reason": "x", "edits": [edit]}, format="json"
    )
    assert response.status_code == 400, response.json()
    assert field in str(response.json())
    assert not RuleChange.objects.exists()


def test_api_overcommit_is_a_400_with_the_numbers(world, api_client):
    api_client.force_authenticate(world.ops)
    response = api_client.post(
        reverse("api_change_propose"),
        {
            "reason": "Grow",
            "edits": [
                {
                    "object_type": "quota",
                    "object": str(world.vision_a100.pk),
                    "field": "guarantee",
                    "value": 60,
                }
            ],
        },
        format="json",
    )
    assert response.status_code == 400
    assert "would add up to 76" in str(response.json())


def test_api_propose_is_refused_for_members(world, member, api_client):
    api_client.force_authenticate(member)
    response = api_client.post(
        reverse("api_change_propose"),
        {
            "reason": "Mine",
            "edits": [
                {"object_type": "project", "object": "vision", "field": "name", "value": "V"}
            ],
        },
        format="json",
    )
    assert response.status_code == 403


def test_change_pages_need_sign_in_and_unknown_changes_are_not_found(world, member):
    for name in ("change_list", "review_list"):
        assert Client().get(reverse(name)).status_code == 302
    client = login(member)
    assert client.get(reverse("change_detail", args=[999999])).status_code == 404
    assert client.post(reverse("change_approve", args=[999999])).status_code == 404
    assert client.get(reverse("change_approve", args=[1])).status_code == 405
    change = services.rule_change_create(
        user=world.ops,
        reason="Grow",
        edits=[EditSpec(target=world.vision_a100, field="guarantee", value=30)],
    )
    page = client.get(reverse("change_detail", args=[change.pk])).content.decode()
    assert "A change to quotas, pools, projects, flavors or preemption classes needs ops." in page
    assert client.get(reverse("change_rollback", args=[change.pk])).status_code == 403
    assert client.post(reverse("change_apply", args=[change.pk])).status_code == 403
