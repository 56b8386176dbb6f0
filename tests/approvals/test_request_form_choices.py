"""The request pages offer what the user can do: "New request" only to people who may file,
and as target tiers only the tiers above the project's own."""

import re

import pytest
from django.urls import reverse

from tests.conftest import login

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("persona", "shown"),
    [("ops", True), ("lead", True), ("member", True), ("approver", False), ("outsider", False)],
)
def test_new_request_is_offered_only_to_those_who_may_file(request, world, persona, shown):
    client = login(request.getfixturevalue(persona))
    page = client.get(reverse("request_list")).content.decode()

    assert (f'href="{reverse("request_create")}"' in page) is shown
    # The button never leads to "Not allowed".
    assert (client.get(reverse("request_create")).status_code == 200) is shown


def _tier_options(page: str) -> set[str]:
    select = re.search(r'<select name="tier"[^>]*>(.*?)</select>', page, re.DOTALL)
    assert select is not None
    return set(re.findall(r'<option value="(\d+)"', select.group(1)))


def test_target_tiers_are_those_above_the_projects_own(world, lead):
    """Vision runs at "Key project": only "Production service" is an upgrade."""
    page = login(lead).get(reverse("request_create")).content.decode()
    assert _tier_options(page) == {str(world.production.pk)}


def test_a_project_without_a_tier_starts_from_the_default(world, ops):
    url = reverse("request_create") + "?project=speech"
    page = login(ops).get(url).content.decode()
    assert _tier_options(page) == {str(world.key.pk), str(world.production.pk)}


def test_with_several_projects_and_none_chosen_every_tier_is_listed(world, ops):
    page = login(ops).get(reverse("request_create")).content.decode()
    assert len(_tier_options(page)) == 4


def test_a_posted_project_narrows_the_tiers_and_a_bad_one_gives_a_form_error(world, ops):
    client = login(ops)
    posted = client.post(
        reverse("request_create"), {"project": world.vision.slug, "kind": "priority_upgrade"}
    )
    assert posted.status_code == 200
    assert _tier_options(posted.content.decode()) == {str(world.production.pk)}

    bad = client.post(reverse("request_create"), {"project": "not-a-number"})
    assert bad.status_code == 200
    assert len(_tier_options(bad.content.decode())) == 4
