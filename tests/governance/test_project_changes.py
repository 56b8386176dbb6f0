"""A project is a governed rule kind like every other: its creation (from the page or the
API) and its edits are proposed, approved by a second person (never its author), applied
with history (the applier, the change's reason) and rolled back by a new change."""

import html

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from governance import services
from governance.models import ChangeStatus, EditKind, Project, RuleChange
from tests.conftest import login

pytestmark = pytest.mark.django_db

FORM = {
    "slug": "robotics",
    "name": "Robotics",
    "description": "Grasping and locomotion.",
    "reason": "A new team from January (OPS-31).",
}


def _text(response) -> str:
    return html.unescape(response.content.decode())


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_new_project_page_proposes_a_change_that_a_second_person_applies(ops, ops2, world):
    response = login(ops).post(reverse("project_create"), {**FORM, "tier": world.regular.pk})

    change = RuleChange.objects.get()
    assert response.status_code == 302
    assert response["Location"] == change.get_absolute_url()
    assert change.status == ChangeStatus.PROPOSED
    assert not Project.objects.filter(slug="robotics").exists()  # nothing until approved
    edit = change.edits.get()
    assert (edit.field, edit.kind, edit.object_id, edit.old_value) == (
        "exists",
        EditKind.DESCRIPTION,
        0,
        None,
    )
    assert edit.new_value["slug"] == "robotics"
    assert edit.new_value["tier"] == world.regular.pk
    assert "robotics (to be created)" in _text(login(ops).get(change.get_absolute_url()))

    # Four eyes: the author cannot approve it, on the page or through the API.
    assert login(ops).post(reverse("change_approve", args=[change.pk])).status_code == 403
    assert _api(ops).post(reverse("api_change_approve", args=[change.pk])).status_code == 403
    change.refresh_from_db()
    assert change.status == ChangeStatus.PROPOSED

    assert login(ops2).post(reverse("change_approve", args=[change.pk])).status_code == 302
    assert login(ops2).post(reverse("change_apply", args=[change.pk])).status_code == 302
    change.refresh_from_db()
    assert change.status == ChangeStatus.APPLIED
    project = Project.objects.get(slug="robotics")
    assert (project.name, project.tier) == ("Robotics", world.regular)
    created = project.history.get()
    assert (created.history_user, created.history_change_reason, created.rule_change_id) == (
        ops2,
        FORM["reason"],
        change.pk,
    )
    edit.refresh_from_db()
    assert edit.object_id == project.pk  # the change names the project it made
    history = _text(login(ops).get(reverse("project_history", args=["robotics"])))
    assert FORM["reason"] in history


def test_a_project_creation_is_rolled_back_by_a_change_that_deletes_it(ops, ops2, world):
    created = services.rule_object_propose_create(
        user=ops, reason="New team", model=Project, data={"slug": "robotics", "name": "Robotics"}
    )
    created = services.rule_change_approve(change=created, user=ops2)
    created = services.rule_change_apply(change=created, user=ops2)
    project = Project.objects.get(slug="robotics")

    rollback = services.rule_change_rollback(change=created, user=ops2, reason="Team cancelled")
    edit = rollback.edits.get()
    assert (edit.field, edit.object_id, edit.new_value) == ("exists", project.pk, None)
    with pytest.raises(Exception, match="someone else must approve"):
        services.rule_change_approve(change=rollback, user=ops2)
    rollback = services.rule_change_approve(change=rollback, user=ops)
    services.rule_change_apply(change=rollback, user=ops)

    assert not Project.objects.filter(slug="robotics").exists()
    deleted = Project.history.filter(slug="robotics").latest("history_date")
    assert (deleted.history_type, deleted.history_user, deleted.history_change_reason) == (
        "-",
        ops,
        "Team cancelled",
    )
    created.refresh_from_db()
    assert created.status == ChangeStatus.ROLLED_BACK


def test_a_project_edit_is_applied_and_rolled_back_with_history(ops, ops2, world):
    vision = world.vision
    old_tier = vision.tier
    change = services.rule_object_propose_update(
        obj=vision,
        user=ops,
        reason="Vision leads the launch",
        data={"name": "Vision (launch)", "tier": world.regular},
    )
    assert sorted((edit.field, edit.kind) for edit in change.edits.all()) == [
        ("name", EditKind.DESCRIPTION),
        ("tier", EditKind.PRIORITY),
    ]
    services.rule_change_apply(
        change=services.rule_change_approve(change=change, user=ops2), user=ops2
    )
    vision.refresh_from_db()
    assert (vision.name, vision.tier) == ("Vision (launch)", world.regular)
    assert vision.history.latest("history_date").history_change_reason == "Vision leads the launch"

    rollback = services.rule_change_rollback(change=change, user=ops, reason="Launch moved")
    services.rule_change_apply(
        change=services.rule_change_approve(change=rollback, user=ops2), user=ops2
    )
    vision.refresh_from_db()
    assert (vision.name, vision.tier) == ("Vision", old_tier)


def test_the_api_proposes_a_project_that_its_author_cannot_approve(ops, ops2, world):
    response = _api(ops).post(
        reverse("api_project_list"),
        {"reason": "New team", "slug": "robotics", "name": "Robotics", "tier": "regular"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    change_id = response.json()["id"]
    assert not Project.objects.filter(slug="robotics").exists()
    assert _api(ops).post(reverse("api_change_approve", args=[change_id])).status_code == 403
    assert _api(ops2).post(reverse("api_change_approve", args=[change_id])).status_code == 200
    assert _api(ops2).post(reverse("api_change_apply", args=[change_id])).status_code == 200
    assert Project.objects.get(slug="robotics").tier == world.regular


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"slug": "robotics"}, "name", "This field is required."),
        ({"slug": "vision", "name": "Vision 2"}, "slug", "Project with this Slug already exists."),
        ({"slug": "robotics", "name": "Robotics", "tier": "nope"}, "tier", "does not exist"),
        ({"slug": "not a slug", "name": "Robotics"}, "slug", "Enter a valid"),
        ({"name": "Robotics"}, "slug", "This field is required."),
    ],
)
def test_bad_project_input_is_a_400_naming_the_field(ops, world, body, field, message):
    response = _api(ops).post(
        reverse("api_project_list"), {"reason": "New team", **body}, format="json"
    )
    assert response.status_code == 400, response.content
    assert message in str(response.json()["fields"][field]), response.json()
    assert not RuleChange.objects.exists()
    assert Project.objects.count() == 2


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({**FORM, "reason": ""}, "This field is required."),
        ({**FORM, "name": ""}, "This field is required."),
        ({**FORM, "slug": "vision"}, "Project with this Slug already exists."),
    ],
)
def test_bad_project_input_on_the_page_is_a_form_error(ops, world, form, message):
    response = login(ops).post(reverse("project_create"), form)
    assert response.status_code == 200
    assert message in _text(response)
    assert not RuleChange.objects.exists()
    assert not Project.objects.filter(slug="robotics").exists()


@pytest.mark.parametrize("persona", ["lead", "member", "approver"])
def test_only_ops_propose_a_project(persona, world, request):
    user = request.getfixturevalue(persona)
    assert login(user).post(reverse("project_create"), FORM).status_code == 403
    response = _api(user).post(
        reverse("api_project_list"), {"reason": "New", "slug": "robotics", "name": "R"}
    )
    assert response.status_code == 403
    assert not RuleChange.objects.exists()


def test_deleting_a_project_that_still_has_members_or_quotas_is_refused_when_proposed(ops, world):
    response = _api(ops).delete(
        reverse("api_project_detail", args=["vision"]), {"reason": "Closed"}, format="json"
    )
    assert response.status_code == 400, response.content
    assert "is still used" in str(response.json()["fields"]["exists"])
    assert not RuleChange.objects.exists()
    assert Project.objects.filter(slug="vision").exists()
