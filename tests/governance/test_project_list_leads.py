"""The project list's leads, read in the list's own query (``JoinedNames``): the page names
each person as everywhere else (the full name, else the username, escaped), the API gives
their usernames; both sorted by username, the same on SQLite and PostgreSQL."""

from django.urls import reverse
from django.utils.html import escape

from governance import services
from governance.models import ProjectRole, User
from tests.conftest import REASON, login


def _leads(world, member) -> None:
    kw = {"user": world.ops, "reason": REASON}
    people = [
        User.objects.create_user(username="zoe", first_name="Ada", last_name="<b>Byron</b>"),
        User.objects.create_user(username="amy"),
        User.objects.create_user(username="mia", first_name="Mia, Jr."),
    ]
    for person in people:
        services.membership_set(**kw, project=world.speech, member=person, role=ProjectRole.LEAD)
    services.membership_set(**kw, project=world.speech, member=member, role="member")


def test_page_names_the_leads_sorted_by_username_and_escaped(world, ops, member):
    _leads(world, member)
    html = login(ops).get(reverse("project_list")).content.decode()
    assert "<td>amy, Mia, Jr., Ada &lt;b&gt;Byron&lt;/b&gt;</td>" in html
    assert f"<td>{escape(User.objects.get(username='lead'))}</td>" in html  # vision's one lead


def test_api_gives_the_leads_usernames_sorted(world, api_client, member):
    _leads(world, member)
    api_client.force_login(member)
    rows = api_client.get(reverse("api_project_list")).data["results"]
    leads = {row["slug"]: row["leads"] for row in rows}
    assert leads == {"speech": ["amy", "mia", "zoe"], "vision": ["lead"]}
