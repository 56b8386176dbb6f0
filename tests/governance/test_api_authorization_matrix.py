"""The API authorization matrix: scope × role × project × operation.

Operations are read from the URL conf (drf-spectacular's endpoint enumerator: every APIView
method under /api/v1/), so an endpoint added later is covered without editing this file.
Roles: vision's lead and member, ops, the approver, vision's service account (``service_a``)
and a site-wide ops-tool account (``site_wide``), each with a token of one scope at a time.
Path parameters name objects of the *other* project (speech) wherever the path has one.

What it shows:
- without a token (or with a bad one) every operation is a 401 with a challenge;
- a token without the operation's scope is a 403 for every role, before anything runs;
- with the scope, no operation answers with a server error;
- vision's service account reads and writes nothing of speech: its reads of speech's
  requests are 404s, its writes on speech's objects are refused, its lists hold only vision;
- no service account (project or site-wide, whatever its scopes) approves, rejects, revokes,
  applies or rolls back anything, while a person with the same token scopes may;
- what a service account authors (a change, a request) is decided by no one behind it: who
  made it, minted its token, or leads its project.
"""

import re
from typing import Any

import pytest
from drf_spectacular.generators import EndpointEnumerator
from rest_framework.test import APIClient

from approvals.models import UpgradeRequest
from governance import services
from governance.models import (
    ApiWrite,
    ChangeStatus,
    RuleChange,
    ServiceAccount,
    TokenScope,
)
from governance.selectors import required_scope
from governance.services import EditSpec
from tests.approvals.conftest import (
    policies,  # noqa: F401  (the fixture)
    quota_exception,
    upgrade,
)
from tests.conftest import REASON, token_for

pytestmark = pytest.mark.django_db

PERSONAS = ["lead", "member", "ops", "approver", "service_a", "site_wide"]
SAFE = {"GET", "HEAD", "OPTIONS"}


def _endpoints() -> list[tuple[str, str, Any]]:
    """(method, path template, view class) of every API operation under /api/v1/."""
    found = []
    for path, _regex, method, callback in EndpointEnumerator().get_api_endpoints():
        if path.startswith("/api/v1/"):
            found.append((method, path, callback.cls))
    return sorted(found, key=lambda row: (row[1], row[0]))


ENDPOINTS = _endpoints()


@pytest.fixture
def scene(request, world, lead, member, approver, ops2) -> dict[str, Any]:
    """Objects of both projects, and one account per kind."""
    request.getfixturevalue("policies")
    kw = {"user": world.ops, "reason": REASON}
    service_a = services.service_account_create(project=world.vision, username="vision-ci", **kw)
    service_b = services.service_account_create(project=world.speech, username="speech-ci", **kw)
    site_wide = services.service_account_create(project=None, username="ops-tool", **kw)
    services.service_account_approve(account=site_wide, user=ops2)  # four eyes: a second person
    b_token = services.service_account_token_create(
        account=service_b, name="speech CI", scopes=["read"], user=world.ops
    )
    member_token = services.personal_token_create(user=member, name="script", scopes=["read"])
    change = services.rule_change_create(
        user=world.ops,
        reason="Speech gets more weight",
        edits=[EditSpec(target=world.speech_a100, field="fair_share_weight", value=5)],
        observation_days=0,
        title="Speech weight",
    )
    return {
        "vision_request": quota_exception(world, lead),
        "speech_request": upgrade(world, world.ops),
        "change": change,
        "service_a": service_a,
        "service_b": service_b,
        "site_wide": site_wide,
        "b_token": b_token,
        "member_token": member_token,
        "people": {"lead": lead, "member": member, "ops": world.ops, "approver": approver},
    }


def _user(scene: dict[str, Any], persona: str) -> Any:
    if persona in scene["people"]:
        return scene["people"][persona]
    return scene[persona].user


def _client(scene: dict[str, Any], persona: str, *scopes: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=token_for(_user(scene, persona), *scopes))
    return client


def _fill(path: str, scene: dict[str, Any]) -> str:
    """The path with its parameters naming the other project's (speech's) objects."""
    by_prefix = [
        (r"^/api/v1/requests/\{pk\}", {"pk": scene["speech_request"].pk}),
        (r"^/api/v1/changes/\{pk\}", {"pk": scene["change"].pk}),
        (r"^/api/v1/quotas/\{pk\}", {"pk": scene["speech_request"].project.quotas.first().pk}),
        (
            r"^/api/v1/service-accounts/\{pk\}",
            {"pk": scene["service_b"].pk, "token_pk": scene["b_token"].pk},
        ),
        (r"^/api/v1/tokens/\{pk\}", {"pk": scene["member_token"].pk}),
        (r"^/api/v1/tiers/", {"slug": "key"}),
        (r"^/api/v1/pools/", {"slug": "training"}),
        (r"^/api/v1/flavors/", {"slug": "a100-80g"}),
        (r"^/api/v1/preemption-classes/", {"slug": "allowed"}),
        (r"^/api/v1/lookup/", {"kind": "projects"}),
    ]
    values: dict[str, Any] = {}
    for pattern, given in by_prefix:
        if re.match(pattern, path):
            values = given
            break

    def value(match: re.Match) -> str:
        name = match.group(1)
        if name in values:
            return str(values[name])
        if name == "pk" or name.endswith(("_pk", "_id", "id")):
            return "1"
        return "speech"  # a slug: the other project

    return re.sub(r"\{(\w+)\}", value, path)


def _call(client: APIClient, method: str, url: str, body: dict | None = None) -> Any:
    return getattr(client, method.lower())(url, body or {}, format="json")


def test_every_operation_is_covered():
    """The URL conf yields the operations (a sanity check of the enumeration)."""
    paths = {path for _method, path, _view in ENDPOINTS}
    assert "/api/v1/requests/{pk}/approve/" in paths
    assert "/api/v1/service-accounts/create/" in paths
    assert len(ENDPOINTS) > 40


def test_without_a_token_every_operation_is_a_401(scene, api_client):
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Bearer arb_00000000_" + "x" * 43)
    for method, path, _view in ENDPOINTS:
        url = _fill(path, scene)
        for client in (api_client, bad):
            response = _call(client, method, url)
            assert response.status_code == 401, (method, url, response.content)
            assert response.headers["WWW-Authenticate"] == 'Bearer realm="api"'


@pytest.mark.parametrize("persona", PERSONAS)
def test_a_token_acts_only_within_its_scopes(scene, persona):
    """Scope × role × operation: a missing scope is a 403 before anything runs (no write);
    with the scope, no operation fails with a server error."""
    for scope in TokenScope.values:
        client = _client(scene, persona, scope)
        for method, path, view in ENDPOINTS:
            url = _fill(path, scene)
            needed = required_scope(view, method)
            writes = ApiWrite.objects.count()
            response = _call(client, method, url)
            cell = (persona, scope, method, url)
            if needed != scope:
                assert response.status_code == 403, (cell, response.content)
                assert "scope" in response.content.decode(), cell
            else:
                assert response.status_code < 500, (cell, response.content)
            if method not in SAFE:
                assert ApiWrite.objects.count() == writes + 1, cell  # every write recorded
            else:
                assert ApiWrite.objects.count() == writes, cell


def _rows(data: Any) -> list[dict]:
    """Every JSON object in a response body."""
    if isinstance(data, dict):
        return [data, *(row for value in data.values() for row in _rows(value))]
    if isinstance(data, list):
        return [row for value in data for row in _rows(value)]
    return []


def _names_speech(row: dict) -> bool:
    project = row.get("project")
    if isinstance(project, dict):
        project = project.get("slug")
    return project == "speech"


def test_a_project_service_account_stays_inside_its_project(scene, world):
    """Every operation, with every scope, on speech's objects: vision's account reads none of
    speech's requests or jobs and changes nothing of speech."""
    client = _client(scene, "service_a")
    before = {
        "speech_request": UpgradeRequest.objects.get(pk=scene["speech_request"].pk).state,
        "change": RuleChange.objects.get(pk=scene["change"].pk).status,
        "service_b": ServiceAccount.objects.get(pk=scene["service_b"].pk).deactivated_at,
    }
    for method, path, view in ENDPOINTS:
        url = _fill(path, scene)
        response = _call(client, method, url)
        cell = (method, url)
        assert response.status_code < 500, cell
        if method not in SAFE:
            assert response.status_code >= 400, (cell, response.content)
        elif response.status_code == 200 and view.__module__.split(".")[0] != "governance":
            # Requests, grants, jobs: never speech's (rules are public inside the
            # organisation and may name speech).
            assert not any(_names_speech(row) for row in _rows(response.json())), cell
    assert (
        _call(client, "GET", f"/api/v1/requests/{scene['speech_request'].pk}/").status_code == 404
    )
    own = _call(client, "GET", f"/api/v1/requests/{scene['vision_request'].pk}/")
    assert own.status_code == 200
    assert before == {
        "speech_request": UpgradeRequest.objects.get(pk=scene["speech_request"].pk).state,
        "change": RuleChange.objects.get(pk=scene["change"].pk).status,
        "service_b": ServiceAccount.objects.get(pk=scene["service_b"].pk).deactivated_at,
    }


REQUEST_BODY = {
    "kind": "queue_jump",
    "tier": "production",
    "job_ids": ["48213"],
    "starts_at": "2099-01-01T08:00:00Z",
    "ends_at": "2099-01-02T08:00:00Z",
    "justification": "Release gate",
    "business_impact": "The release slips a week",
}


@pytest.mark.parametrize(
    ("persona", "vision", "speech"),
    [
        ("service_a", 201, 403),
        ("member", 201, 403),
        ("lead", 201, 403),
        ("approver", 403, 403),
        ("ops", 201, 201),
        ("site_wide", 201, 201),
    ],
)
def test_who_files_requests_for_which_project(scene, persona, vision, speech):
    client = _client(scene, persona, TokenScope.REQUEST)
    url = "/api/v1/requests/create/"
    assert _call(client, "POST", url, {**REQUEST_BODY, "project": "vision"}).status_code == vision
    assert _call(client, "POST", url, {**REQUEST_BODY, "project": "speech"}).status_code == speech
    reader = _client(scene, persona, TokenScope.READ)
    assert _call(reader, "POST", url, {**REQUEST_BODY, "project": "vision"}).status_code == 403


DECISIONS = [
    ("requests", "vision_request", "approve", {"comment": "ok"}),
    ("requests", "vision_request", "reject", {"reason": "no"}),
    ("requests", "speech_request", "approve", {"comment": "ok"}),
    ("requests", "speech_request", "reject", {"reason": "no"}),
    ("changes", "change", "approve", {"note": "ok"}),
    ("changes", "change", "reject", {"note": "no"}),
]


@pytest.mark.parametrize("persona", ["service_a", "site_wide"])
def test_a_service_account_never_approves_anything(scene, persona):
    """Even with every scope, and as a site-wide account that otherwise acts as ops."""
    client = _client(scene, persona)
    for kind, name, action, body in DECISIONS:
        url = f"/api/v1/{kind}/{scene[name].pk}/{action}/"
        response = _call(client, "POST", url, body)
        assert response.status_code in (403, 404), (url, response.content)
    change = scene["change"]
    for action in ("apply", "rollback"):
        url = f"/api/v1/changes/{change.pk}/{action}/"
        response = _call(client, "POST", url, {"reason": "Pipeline says so"})
        assert response.status_code in (403, 404), action
    assert UpgradeRequest.objects.get(pk=scene["vision_request"].pk).approvals.count() == 0
    assert RuleChange.objects.get(pk=change.pk).status == ChangeStatus.PROPOSED


def test_a_service_account_never_revokes_a_grant_nor_applies_a_change(scene, world, ops2):
    from approvals import services as approval_services

    request = scene["vision_request"]
    approval_services.request_approve(request=request, user=world.ops, comment="ok")
    change = scene["change"]
    services.rule_change_approve(change=change, user=ops2)
    client = _client(scene, "site_wide")
    revoke = _call(client, "POST", f"/api/v1/requests/{request.pk}/revoke/", {"reason": "x"})
    assert revoke.status_code == 403
    assert _call(client, "POST", f"/api/v1/changes/{change.pk}/apply/", {}).status_code == 403
    assert RuleChange.objects.get(pk=change.pk).status == ChangeStatus.APPROVED


def test_a_person_with_the_same_scopes_may_decide(scene):
    """The refusals above come from the account kind, not from the token's scopes."""
    client = _client(scene, "ops")
    url = f"/api/v1/requests/{scene['vision_request'].pk}/approve/"
    assert _call(client, "POST", url, {"comment": "ok"}).status_code == 200


def test_a_view_with_its_own_permission_classes_still_needs_the_scope(world, ci_user):
    """The scope is enforced by the authentication too: a view that replaces the default
    permission classes (say, ``AllowAny``) cannot be called beyond a token's scopes."""
    from rest_framework.permissions import AllowAny
    from rest_framework.response import Response
    from rest_framework.test import APIRequestFactory
    from rest_framework.views import APIView

    class Probe(APIView):
        permission_classes = [AllowAny]

        def get(self, request):
            return Response({"ok": True})

        def post(self, request):
            return Response({"ok": True})

    header = token_for(ci_user, TokenScope.READ)
    factory = APIRequestFactory()
    assert Probe.as_view()(factory.get("/probe/", HTTP_AUTHORIZATION=header)).status_code == 200
    refused = Probe.as_view()(factory.post("/probe/", {}, HTTP_AUTHORIZATION=header))
    assert refused.status_code == 403
    assert "request" in str(refused.data["detail"])


# --- service accounts as authors (four eyes across identities) ------------------------------
# Who may decide what a service account authored (a rule change: site-wide accounts only; a
# request: both): nobody behind it (ops made both accounts and minted the tokens; the lead
# leads vision), anyone else with the right role (the approver does not see vision's request).
AUTHOR_DECIDERS = {
    ("service_a", "request"): {"ops": 403, "ops2": 200, "lead": 403, "approver": 404},
    ("site_wide", "request"): {"ops": 403, "ops2": 200, "lead": 403, "approver": 404},
    ("site_wide", "change"): {"ops": 403, "ops2": 200, "lead": 403, "approver": 403},
}
BEHIND = {("service_a", "ops"), ("service_a", "lead"), ("site_wide", "ops")}


def _authored(scene: dict[str, Any], world: Any, author: str, what: str) -> str:
    """What ``author`` files through its token (made by ops): the URL to approve it at."""
    client = _client(scene, author, TokenScope.READ, TokenScope.REQUEST)
    if what == "change":
        edit = {
            "object_type": "quota",
            "object": str(world.vision_a100.pk),
            "field": "guarantee",
            "value": 30,
        }
        made = _call(
            client, "POST", "/api/v1/changes/propose/", {"reason": "More", "edits": [edit]}
        )
        assert made.status_code == 201, made.content
        return f"/api/v1/changes/{made.json()['id']}/approve/"
    made = _call(
        client,
        "POST",
        "/api/v1/requests/create/",
        {
            "project": "vision",
            "kind": "quota_exception",
            "pool": world.training.slug,
            "flavor": world.a100.slug,
            "extra_gpus": 16,
            "starts_at": "2099-01-01T08:00:00Z",
            "ends_at": "2099-01-03T08:00:00Z",
            "justification": "Ablations",
            "business_impact": "The paper slips",
        },
    )
    assert made.status_code == 201, made.content
    return f"/api/v1/requests/{made.json()['id']}/approve/"


@pytest.mark.parametrize(("author", "what"), sorted(AUTHOR_DECIDERS))
@pytest.mark.parametrize("decider", ["ops", "ops2", "lead", "approver"])
def test_what_a_service_account_authors_is_decided_by_no_one_behind_it(
    scene, world, ops2, author, what, decider
):
    url = _authored(scene, world, author, what)
    person = ops2 if decider == "ops2" else scene["people"][decider]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=token_for(person))
    response = _call(client, "POST", url, {})
    assert response.status_code == AUTHOR_DECIDERS[(author, what)][decider], response.content
    if (author, decider) in BEHIND:  # refused by the four-eyes rule, which says so
        assert "Four eyes" in response.json()["detail"]


# --- the pages that make rules: every create page and the approval policies' pages ---------


def _rule_pages(scene: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], type]]:
    """(page name, URL, a valid form, the model it would write): every registered rule
    kind's create page (read from the registry, so a kind added later is covered) and the
    approval policies' edit page."""
    from django.urls import NoReverseMatch, reverse

    from approvals.models import ApprovalPolicy
    from governance.selectors.changes.kinds import REGISTRY
    from tests.governance.test_create_changes import CHAINS

    world = scene["world"]
    forms: dict[str, dict[str, Any]] = {kind: form(world) for kind, (_m, form) in CHAINS.items()}
    forms["project"] = {"slug": "robotics", "name": "Robotics", "reason": "A new team"}
    forms["cluster"] = {
        "name": "lab",
        "backend": "slurm",
        "slurm_cluster": "arbiter",
        "slurm_conf": "/etc/slurm/slurm.conf",
        "command_timeout": 30,
        "kube_namespace_template": "{project}",
        "pools": [world.training.pk],
        "enabled": "on",
        "reason": "Sync the training pool",
    }
    forms["approval_policy"] = {
        "kind": "queue_jump",
        "tier": world.regular.pk,
        "max_duration_days": 2,
        "approver": "ops",
        "approvals_required": 2,
        "monthly_flag_threshold": 3,
        "reason": "Regular's queue jumps",
    }
    pages = []
    for kind in REGISTRY.values():
        try:
            url = reverse(f"{kind.pages}_create")
        except NoReverseMatch:
            continue  # created through the API only
        pages.append((f"{kind.pages}_create", url, forms[kind.object_type], kind.model))
    policy = ApprovalPolicy.objects.filter(kind="quota_exception").first()
    assert policy is not None
    pages.append(
        (
            "approval_policy_edit",
            reverse("approval_policy_edit", args=[policy.pk]),
            {
                "max_duration_days": 10,
                "approver": "ops",
                "approvals_required": 2,
                "monthly_flag_threshold": 2,
                "reason": "Ten days, two people",
            },
            ApprovalPolicy,
        )
    )
    return pages


def _counts(model: Any) -> tuple[int, int, list]:
    rows = list(model._default_manager.order_by("pk").values())
    return RuleChange.objects.count(), len(rows), rows


@pytest.mark.parametrize("persona", ["lead", "member", "approver", "service_a"])
def test_only_ops_reach_the_pages_that_make_rules(scene, world, persona):
    """Page × role: anyone but ops gets a 403 on every create page and the policy pages,
    GET or POST, and nothing is written (no change, no row)."""
    from tests.conftest import login

    scene["world"] = world
    client = login(_user(scene, persona))
    for name, url, form, model in _rule_pages(scene):
        before = _counts(model)
        assert client.get(url).status_code in (302, 403), (persona, name)
        response = client.post(url, form)
        assert response.status_code in (302, 403), (persona, name)
        if response.status_code == 302:  # a service account has no session: to sign-in
            assert "/accounts/login/" in response["Location"] or "login" in response["Location"]
        assert _counts(model) == before, (persona, name)


def test_ops_propose_from_every_page_that_makes_rules_and_never_approve_alone(scene, world, ops2):
    """Ops: every create page and the policy page proposes (nothing written until a second
    person approves); ops' own approval is refused naming four eyes."""
    from django.urls import reverse

    from tests.conftest import login

    scene["world"] = world
    client = login(world.ops)
    for name, url, form, model in _rule_pages(scene):
        changes, rows, values = _counts(model)
        assert client.get(url).status_code == 200, name
        response = client.post(url, form)
        assert response.status_code == 302, (name, response.content.decode()[-2000:])
        change = RuleChange.objects.latest("pk")
        assert response["Location"] == change.get_absolute_url(), name
        assert change.status == ChangeStatus.PROPOSED, name
        assert _counts(model) == (changes + 1, rows, values), name
        refused = client.post(reverse("change_approve", args=[change.pk]))
        assert refused.status_code == 403, name
        assert "someone else must approve it" in refused.content.decode(), name
        # A second person approves it (a tier ops will own: another ops person).
        assert login(ops2).post(reverse("change_approve", args=[change.pk])).status_code == 302
        change.refresh_from_db()
        assert change.status == ChangeStatus.APPROVED, name
