"""The header's role badge: a project lead reads "Lead", not "Member"."""

import pytest
from django.urls import reverse
from django.utils import translation

from governance import services
from governance.models import ProjectRole
from tests.conftest import REASON, login

pytestmark = pytest.mark.django_db


def _badge(user, language="en") -> str:
    client = login(user)
    client.cookies["django_language"] = language
    page = client.get(reverse("home")).content.decode()
    start = page.index('class="badge badge--role"')
    return page[page.index(">", start) + 1 : page.index("</span>", start)]


@pytest.mark.parametrize(
    ("persona", "label"),
    [
        ("ops", "Ops"),
        ("approver", "Approver"),
        ("lead", "Lead"),
        ("member", "Member"),
        ("outsider", "Member"),
    ],
)
def test_the_badge_names_the_role(request, world, persona, label):
    user = request.getfixturevalue(persona)
    assert _badge(user) == label
    with translation.override("zh-hans"):
        assert _badge(user, "zh-hans") == translation.gettext(label)


def test_a_member_who_becomes_lead_reads_lead(world, ops, member):
    assert _badge(member) == "Member"
    services.membership_set(
        user=ops, reason=REASON, project=world.speech, member=member, role=ProjectRole.LEAD
    )
    assert _badge(member) == "Lead"
