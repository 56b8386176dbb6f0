"""The project list's leads, read in the list's own query (``JoinedNames``): the page names
each person as everywhere else (the full name, else the username, escaped), the API gives
their usernames; both sorted by username, the same on SQLite and PostgreSQL."""

from django.template import Context, Template
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe

from governance import selectors, services
from governance.models import ProjectRole, User
from governance.templatetags.arbiter import project_row
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


# The row as the list's template wrote it cell by cell before ``project_row``.
CELLS = """<tr>
      <td><a href="{% url 'project_detail' project.slug %}">{{ project.name }}</a></td>
      <td><code>{{ project.slug }}</code></td>
      <td>{% if project.tier_slug %}<a href="{% url 'tier_detail' project.tier_slug %}">{{ project.tier_name }}</a>{% elif default_label %}<span class="muted">{{ default_label }}</span>{% else %}—{% endif %}</td>
      <td>{% if project.lead_names %}{{ project.lead_names }}{% else %}<span class="muted">—</span>{% endif %}</td>
      <td class="num">{{ project.member_count }}</td>
      <td class="num">{{ project.guaranteed_gpus }}</td>
    </tr>"""  # noqa: E501


def test_project_row_writes_what_the_cells_wrote(world, member):
    _leads(world, member)
    cells = Template(CELLS)
    rows = 0
    for project in selectors.project_list():
        for label in ["", mark_safe("Regular &amp; co (default)")]:
            context = {"project": project, "default_label": label}
            assert project_row(project, label) == cells.render(Context(context))
            rows += 1
    assert rows == 4
