"""Form fields that would list every user or project are typed, with suggestions: the
membership form's user, the new quota's project, the request's project. The page holds no
menu of every row; it loads lookup.js; the server still decides what is accepted."""

import re

import pytest
from django.urls import reverse

from approvals.forms import PROJECT_MENU_MAX
from governance.models import Project, Quota, RuleChange, User
from tests.conftest import login

pytestmark = pytest.mark.django_db


def _lookup_input(page: str, name: str) -> str:
    match = re.search(rf'<input[^>]*name="{name}"[^>]*>', page)
    assert match, f"no text input {name}"
    return match.group(0)


@pytest.mark.parametrize(
    ("url_name", "args", "name", "kind"),
    [
        ("membership_edit", ["vision"], "set-member", "users"),
        ("quota_create", [], "project", "projects"),
        ("request_create", [], "project", "projects"),
        ("tier_create", [], "owner", "users"),
        ("preemption_class_create", [], "recovery_owner", "users"),
    ],
)
def test_the_field_is_a_search_as_you_type_input(world, ops, url_name, args, name, kind):
    for number in range(30):
        User.objects.create_user(username=f"person{number:02d}")
    if kind == "projects":  # a few projects are offered in a menu (approvals.forms)
        for number in range(PROJECT_MENU_MAX + 1):
            Project.objects.create(slug=f"project-{number:02d}", name=f"Project {number:02d}")
    page = login(ops).get(reverse(url_name, args=args)).content.decode()
    field = _lookup_input(page, name)
    assert f'data-lookup="/api/v1/lookup/{kind}/"' in field
    assert f'<select name="{name}"' not in page
    assert "person29" not in page  # no menu of every user
    assert "js/lookup.js" in page


def test_membership_takes_a_username_and_refuses_an_unknown_one(world, ops, outsider):
    client = login(ops)
    url = reverse("membership_edit", args=["vision"])
    bad = client.post(
        url, {"action": "set", "set-member": "nobody", "set-role": "member", "set-reason": "x"}
    )
    assert bad.status_code == 200
    assert "Nothing is named “nobody”" in bad.content.decode()
    assert not RuleChange.objects.exists()

    client.post(
        url,
        {"action": "set", "set-member": outsider.username, "set-role": "member", "set-reason": "x"},
    )
    assert RuleChange.objects.count() == 1  # the typed username was taken


def test_a_quota_is_created_for_a_typed_project_slug(world, ops):
    page = login(ops).post(
        reverse("quota_create"),
        {
            "project": "no-such-project",
            "pool": world.training.pk,
            "flavor": world.h100.pk,
            "guarantee": 1,
            "reason": "x",
        },
    )
    assert page.status_code == 200
    assert "Nothing is named “no-such-project”" in page.content.decode()
    assert not Quota.objects.filter(flavor=world.h100, project__slug="no-such-project").exists()


def test_a_request_for_a_project_of_someone_else_is_a_form_error(world, lead):
    page = login(lead).post(
        reverse("request_create"), {"project": world.speech.slug, "kind": "priority_upgrade"}
    )
    assert page.status_code == 200
    assert f"Nothing is named “{world.speech.slug}”" in page.content.decode()


def test_an_edit_form_shows_the_owner_by_username_and_keeps_it(world, ops):
    page = login(ops).get(reverse("tier_edit", args=[world.key.slug])).content.decode()
    field = _lookup_input(page, "owner")
    assert f'value="{world.key.owner.username}"' in field
