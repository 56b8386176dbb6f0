"""Filing a request: who may file for which project, the fields each kind needs, the policy's
time box, and the evidence captured when it is submitted."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals import services
from approvals.models import EventAction, RequestKind, RequestState
from governance import services as governance_services
from governance.models import ProjectRole
from tests.approvals.conftest import DAY, HOUR, T0, quota_exception, upgrade
from tests.conftest import REASON, login

pytestmark = pytest.mark.django_db


def test_a_lead_files_a_draft_and_submits_it_with_its_evidence(world, policies, lead):
    draft = quota_exception(world, lead, submit=False)
    assert draft.state == RequestState.DRAFT
    assert draft.evidence == {}
    assert [event.action for event in draft.events.all()] == [EventAction.CREATED]

    submitted = services.request_submit(request=draft, user=lead, now=T0 - HOUR)

    assert submitted.state == RequestState.SUBMITTED
    assert submitted.submitted_at == T0 - HOUR
    assert submitted.policy == policies.quota_exception
    assert submitted.approver_rule == "ops"
    evidence = submitted.evidence
    assert evidence["tier"]["slug"] == "key"
    [quota] = evidence["quotas"]
    assert (quota["pool"]["slug"], quota["flavor"]["slug"]) == ("training", "a100-80g")
    assert (quota["guarantee"], quota["maximum"]) == (24, 40)
    assert (quota["pool_capacity"], quota["pool_committed"]) == (64, 40)
    # The workload evidence (no job collected here): zero use, no waits; nothing made up.
    assert evidence["usage"]["usage"] == {"gpu_hours": 0.0, "mean_gpus": 0.0}
    assert evidence["usage"]["flavors"][0]["running"] == 0
    assert evidence["recent_waits"] == []
    assert evidence["recent_exceptions"] == []
    assert not submitted.flagged


def test_a_lead_files_only_for_their_own_project(world, policies, lead):
    with pytest.raises(PermissionDenied):
        upgrade(world, lead)


def test_an_outsider_cannot_file_but_ops_and_members_can(world, policies, outsider, member):
    with pytest.raises(PermissionDenied):
        quota_exception(world, outsider)
    assert quota_exception(world, member).state == RequestState.SUBMITTED
    assert upgrade(world, world.ops).state == RequestState.SUBMITTED


def test_a_request_longer_than_the_policy_is_refused_naming_the_limit(world, policies, lead):
    with pytest.raises(ValidationError) as error:
        quota_exception(world, lead, ends_at=T0 + 15 * DAY)
    [message] = error.value.message_dict["ends_at"]
    assert "At most 14 days" in message
    assert "15.0 days" in message


def test_the_tier_policy_applies_to_upgrades_to_that_tier(world, policies, lead):
    with pytest.raises(ValidationError) as error:
        upgrade(world, lead, project=world.vision, tier=world.production, ends_at=T0 + 8 * DAY)
    assert "At most 7 days" in error.value.message_dict["ends_at"][0]
    assert "Production service" in error.value.message_dict["ends_at"][0]


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"tier": "regular"}, "tier", "already runs at Key project"),
        ({"kind": RequestKind.QUEUE_JUMP, "tier": "production"}, "job_ids", "names the pending"),
        ({"tier": None}, "tier", "Say which tier"),
        ({"pool": "training", "flavor": "a100"}, "pool", "does not use this field"),
    ],
)
def test_each_kind_needs_its_fields(world, policies, lead, overrides, field, words):
    slugs = {"regular": world.regular, "production": world.production, "training": world.training}
    slugs["a100"] = world.a100
    values = {key: slugs.get(value, value) for key, value in overrides.items()}
    with pytest.raises(ValidationError) as error:
        upgrade(world, lead, **{"project": world.vision, "tier": world.production, **values})
    assert words in " ".join(error.value.message_dict[field])


def test_a_quota_exception_needs_a_quota_to_raise(world, policies, lead):
    with pytest.raises(ValidationError) as error:
        quota_exception(world, lead, pool=world.inference)
    assert "has no quota of A100 80G in Inference" in error.value.message_dict["pool"][0]


def test_protection_must_be_stricter_than_what_the_project_has(world, policies, lead):
    with pytest.raises(ValidationError) as error:
        quota_exception(
            world,
            lead,
            kind=RequestKind.PREEMPTION_PROTECTION,
            pool=None,
            flavor=None,
            extra_gpus=None,
            preemption_class=world.allowed,
        )
    assert "allows preemption" in error.value.message_dict["preemption_class"][0]
    protected = quota_exception(
        world,
        lead,
        kind=RequestKind.PREEMPTION_PROTECTION,
        pool=None,
        flavor=None,
        extra_gpus=None,
        preemption_class=world.forbidden,
    )
    assert protected.state == RequestState.SUBMITTED


def test_without_a_policy_nothing_can_be_filed(world, lead):
    with pytest.raises(ValidationError) as error:
        quota_exception(world, lead)
    assert "ask ops to add one" in " ".join(error.value.messages)


def test_an_extension_is_a_new_request_linked_to_the_old_one(world, policies, lead, ops):
    first = quota_exception(world, lead)
    services.request_approve(request=first, user=ops, now=T0 - HOUR)
    extension = quota_exception(
        world, lead, starts_at=T0 + 3 * DAY, ends_at=T0 + 5 * DAY, extends=first
    )
    assert extension.extends == first
    assert extension.state == RequestState.SUBMITTED
    assert first.events.filter(action=EventAction.EXTENDED).count() == 1
    with pytest.raises(ValidationError):
        quota_exception(world, lead, extends=extension)  # still pending: nothing to extend


def test_the_form_explains_the_kinds_and_shows_the_limits(world, policies, lead):
    response = login(lead).get(reverse("request_create"))
    text = response.content.decode()
    assert response.status_code == 200
    assert "Approved by the target tier&#x27;s business owner" in text
    assert "14 days" in text and "7 days" in text
    assert "(2 distinct approvers)" in text


def test_the_form_files_and_submits(world, policies, lead):
    response = login(lead).post(
        reverse("request_create"),
        {
            "project": world.vision.slug,
            "kind": RequestKind.QUOTA_EXCEPTION,
            "pool": world.training.pk,
            "flavor": world.a100.pk,
            "extra_gpus": 8,
            "tier": world.production.pk,  # not used by a quota exception: dropped
            "starts_at": "2099-01-01T08:00",
            "ends_at": "2099-01-04T08:00",
            "justification": "Ablations",
            "business_impact": "Paper",
            "action": "submit",
        },
    )
    assert response.status_code == 302
    request = world.vision.requests.get()
    assert response["Location"] == reverse("request_detail", args=[request.pk])
    assert (request.state, request.tier, request.extra_gpus) == ("submitted", None, 8)


def test_the_form_shows_the_policy_limit_when_too_long(world, policies, lead):
    response = login(lead).post(
        reverse("request_create"),
        {
            "project": world.vision.slug,
            "kind": RequestKind.QUOTA_EXCEPTION,
            "pool": world.training.pk,
            "flavor": world.a100.pk,
            "extra_gpus": 8,
            "starts_at": "2099-01-01T08:00",
            "ends_at": "2099-02-01T08:00",
            "justification": "Ablations",
            "business_impact": "Paper",
        },
    )
    assert response.status_code == 200
    assert "At most 14 days" in response.content.decode()
    assert not world.vision.requests.exists()


def test_the_form_is_forbidden_to_people_in_no_project(world, policies, outsider):
    assert login(outsider).get(reverse("request_create")).status_code == 403


def test_the_ci_pipeline_files_for_its_project_through_the_api(
    world, policies, api_client, ci_user, ci_token
):
    governance_services.membership_set(
        project=world.vision, member=ci_user, role=ProjectRole.MEMBER, user=world.ops, reason=REASON
    )
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {ci_token.key}")
    body = {
        "project": "vision",
        "kind": "queue_jump",
        "tier": "production",
        "job_ids": ["48213", "48214"],
        "starts_at": "2099-01-01T08:00:00Z",
        "ends_at": "2099-01-02T08:00:00Z",
        "justification": "Release gate",
        "business_impact": "The release slips a week",
    }
    response = api_client.post(reverse("api_request_create"), body)
    assert response.status_code == 201, response.json()
    data = response.json()
    assert (data["state"], data["requester"], data["job_ids"]) == (
        "submitted",
        "ci-pipeline",
        ["48213", "48214"],
    )
    assert data["evidence"]["tier"]["slug"] == "key"
    assert api_client.get(reverse("api_request_detail", args=[data["id"]])).status_code == 200

    speech = api_client.post(reverse("api_request_create"), {**body, "project": "speech"})
    assert speech.status_code == 403


def test_bad_api_input_is_a_400_naming_the_fields(world, policies, api_client, lead):
    api_client.force_authenticate(lead)
    response = api_client.post(
        reverse("api_request_create"),
        {"project": "nope", "kind": "bribe", "starts_at": "soon", "extra_gpus": -1},
    )
    assert response.status_code == 400
    assert {"project", "kind", "starts_at", "ends_at", "justification", "extra_gpus"} <= set(
        response.json()["fields"]
    )
    too_long = api_client.post(
        reverse("api_request_create"),
        {
            "project": "vision",
            "kind": "quota_exception",
            "pool": "training",
            "flavor": "a100-80g",
            "extra_gpus": 8,
            "starts_at": "2099-01-01T08:00:00Z",
            "ends_at": "2099-03-01T08:00:00Z",
            "justification": "Ablations",
            "business_impact": "Paper",
        },
    )
    assert too_long.status_code == 400
    assert "At most 14 days" in too_long.json()["fields"]["ends_at"][0]


def _more_projects(world, start: int, stop: int) -> None:
    for index in range(start, stop):
        project = governance_services.project_create(
            user=world.ops, reason=REASON, slug=f"extra-{index}", name=f"Extra {index}"
        )
        governance_services.quota_create(
            user=world.ops,
            reason=REASON,
            project=project,
            pool=world.training,
            flavor=world.a100,
            guarantee=0,
            borrow_limit=4,
            preemption_class=world.allowed,
        )


@pytest.mark.parametrize("make", [quota_exception, upgrade])
def test_submitting_costs_the_same_queries_whatever_the_number_of_projects(world, policies, make):
    """The checks and the evidence read the rules of the one project, not of every project."""
    counts = []
    for start, stop in ((0, 2), (2, 30)):
        _more_projects(world, start, stop)
        with CaptureQueriesContext(connection) as captured:
            make(world, world.ops, ends_at=T0 + DAY + stop * HOUR)
        counts.append(len(captured.captured_queries))
    assert counts[0] == counts[1]
