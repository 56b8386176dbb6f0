"""Who reads what, as a matrix of role × project × object kind, for pages and the API, lists
and details: rules are public inside the organisation; a request (its justification, business
impact and evidence) is read by its project's members, its requester, its approvers and ops.
"""

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tests.approvals.conftest import quota_exception, upgrade
from tests.conftest import login, token_for

pytestmark = pytest.mark.django_db

PERSONAS = ["ops", "approver", "lead", "member", "outsider", "ci_user", "anonymous"]

# ``ci_user`` is vision's service account: it reads through the API with its token and is
# never let into the pages (a 302 to the sign-in page, as for anyone signed out).
NO_PAGES = {"anonymous", "ci_user"}

# Who may read each request: vision's quota exception (filed by vision's lead, decided by
# ops) and speech's upgrade to the Key tier (filed by ops; the tier's owner, approver,
# decides). Speech has no members.
READERS = {
    "vision": {"ops", "lead", "member", "ci_user"},
    "speech": {"ops", "approver"},
}


@pytest.fixture
def scene(world, policies, lead, member, outsider, approver, ci_user):
    return {
        "vision": quota_exception(world, lead),
        "speech": upgrade(world, world.ops),
    }


def _clients(request, persona: str) -> tuple[Client, APIClient]:
    api = APIClient()
    if persona == "anonymous":
        return Client(), api
    user = request.getfixturevalue("world").ops if persona == "ops" else None
    user = user or request.getfixturevalue(persona)
    if persona == "ci_user":
        api.credentials(HTTP_AUTHORIZATION=token_for(user))
    else:
        api.force_authenticate(user)
    return login(user), api


@pytest.mark.parametrize("persona", PERSONAS)
def test_requests_are_read_by_their_project_approvers_and_ops(request, scene, persona):
    page, api = _clients(request, persona)
    list_page = page.get(reverse("request_list"))
    list_api = api.get(reverse("api_request_list"))
    if persona in NO_PAGES:
        assert list_page.status_code == 302
        html = ""
    else:
        assert list_page.status_code == 200
        html = list_page.content.decode()
    if persona == "anonymous":
        assert list_api.status_code == 401
    else:
        assert list_api.status_code == 200
        listed = {row["id"] for row in list_api.json()["results"]}
    for project, upgrade_request in scene.items():
        may_read = persona in READERS[project]
        detail_page = page.get(reverse("request_detail", args=[upgrade_request.pk]))
        detail_api = api.get(reverse("api_request_detail", args=[upgrade_request.pk]))
        cell = (persona, project)
        if persona == "anonymous":
            assert detail_page.status_code == 302, cell
            assert detail_api.status_code == 401, cell
            continue
        assert detail_api.status_code == (200 if may_read else 404), cell
        assert (upgrade_request.pk in listed) is may_read, cell
        if persona in NO_PAGES:
            assert detail_page.status_code == 302, cell
            continue
        assert detail_page.status_code == (200 if may_read else 404), cell
        assert (reverse("request_detail", args=[upgrade_request.pk]) in html) is may_read, cell
        if may_read:
            assert upgrade_request.justification in detail_page.content.decode()
            assert detail_api.json()["justification"] == upgrade_request.justification
        else:
            assert upgrade_request.justification not in detail_page.content.decode()
            assert upgrade_request.justification not in html
    # Filtering by project or requester does not reveal another project's requests.
    if persona != "anonymous":
        for query in ({"project": "speech"}, {"requester": "ops"}, {"project": "vision"}):
            rows = api.get(reverse("api_request_list"), query).json()["results"]
            for row in rows:
                assert persona in READERS[row["project"]["slug"]], (persona, query)


RULES = [
    # (page list, API list, the object's page, its API detail)
    ("project_list", "api_project_list", "/projects/vision/", "/api/v1/projects/vision/"),
    ("tier_list", "api_tier_list", "/tiers/key/", "/api/v1/tiers/key/"),
    ("pool_list", "api_pool_list", "/pools/training/", "/api/v1/pools/training/"),
    ("flavor_list", "api_flavor_list", "/flavors/a100-80g/", "/api/v1/flavors/a100-80g/"),
    (
        "preemption_class_list",
        "api_preemption_class_list",
        "/preemption-classes/cautious/",
        "/api/v1/preemption-classes/cautious/",
    ),
    ("quota_list", "api_quota_list", None, None),
]


@pytest.mark.parametrize("persona", PERSONAS)
def test_rules_are_public_inside_the_organisation(request, world, persona):
    page, api = _clients(request, persona)
    quota = world.speech_a100  # a project the persona may not belong to
    for list_name, api_list_name, detail, api_detail in RULES:
        detail = detail or f"/quotas/{quota.pk}/"
        api_detail = api_detail or f"/api/v1/quotas/{quota.pk}/"
        urls = [reverse(list_name), detail]
        api_urls = [reverse(api_list_name), api_detail]
        for url in urls:
            expected = 302 if persona in NO_PAGES else 200
            assert page.get(url).status_code == expected, (persona, url)
        for url in api_urls:
            expected = 401 if persona == "anonymous" else 200
            assert api.get(url).status_code == expected, (persona, url)
