"""The home page shows each role what it needs first; every section that applies is shown."""

import gzip
import html
from datetime import timedelta

import plotly
import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from governance import services
from governance.models import GrantKind, ProjectRole, Terms
from tests.conftest import REASON, login

OPS_SECTIONS = ['id="pool-capacity"', 'id="reviews-due"']
OWNER_SECTION = 'id="your-tiers"'
LEAD_SECTION = 'id="projects-you-lead"'
MEMBER_SECTION = 'id="your-projects"'
ALL_SECTIONS = [*OPS_SECTIONS, OWNER_SECTION, LEAD_SECTION, MEMBER_SECTION]


def _home(user, **client_options) -> str:
    response = login(user).get(reverse("home"), **client_options)
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def _shown(page: str) -> list[str]:
    return [section for section in ALL_SECTIONS if section in page]


def test_anonymous_is_sent_to_sign_in(db):
    response = Client().get(reverse("home"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_ops_sees_pool_capacity_chart_and_reviews_due(ops, world, today):
    services.tier_update(
        tier=world.key,
        user=ops,
        reason=REASON,
        data={"last_reviewed_on": today - timedelta(days=85)},
    )
    page = _home(ops)
    assert _shown(page) == [*OPS_SECTIONS, OWNER_SECTION]  # ops owns every tier here
    # The chart is drawn from its own small endpoint once shown, plotly.js loaded then.
    chart = page.split('class="chart"')[1].split(">")[0]
    assert f'data-plotly-url="{reverse("home_pool_usage")}"' in chart
    figure = login(ops).get(reverse("home_pool_usage")).json()
    assert [trace["name"] for trace in figure["data"]] == [
        "Capacity",
        "Guaranteed to projects",
        "Held by child pools",
    ]
    assert figure["data"][0]["x"][0] == "Inference · A100 80G"
    assert f'data-plotly-src="{reverse("plotly_js", args=[plotly.__version__])}"' in chart
    assert "plotly.min.js" not in page.split('class="chart"')[0]  # not loaded up front
    usage_row = page.split(">Training</a></td>")[1].split("</tr>")[0]
    assert ">A100 80G</a></td>" in usage_row
    assert '<td class="num">64</td>' in usage_row and '<td class="num">40</td>' in usage_row
    reviews = page.split('id="reviews-due"')[1].split("</section>")[0]
    assert "Key project" in reviews
    assert "Production service" not in reviews


def test_an_approver_sees_the_tiers_they_own_and_what_is_due(ops, approver, world, today):
    services.tier_update(
        tier=world.key,
        user=ops,
        reason=REASON,
        data={"owner": approver, "last_reviewed_on": today - timedelta(days=85)},
    )
    page = _home(approver)
    assert _shown(page) == [OWNER_SECTION]
    owned = page.split(OWNER_SECTION)[1].split("</section>")[0]
    assert "Key project" in owned
    assert "Due for review:" in owned
    assert "Production service" not in owned


def test_an_approver_who_owns_no_tier_is_told_so(approver, world):
    page = _home(approver)
    assert _shown(page) == [OWNER_SECTION]
    assert "You own no tier yet." in page


def test_a_lead_sees_their_projects_tier_allowed_tiers_and_quotas(lead, world):
    page = _home(lead)
    assert _shown(page) == [LEAD_SECTION]
    section = page.split(LEAD_SECTION)[1].split("</section>")[0]
    assert ">Vision</a>" in section
    assert ">Key project</a>" in section
    allowed = section.split("Allowed tiers")[1].split("</dd>")[0]
    assert [name in allowed for name in ("Key project", "Regular", "Exploratory")] == [True] * 3
    assert "Production service" not in allowed
    quota_row = section.split("<tbody>")[1].split("</tr>")[0]
    numbers = ['<td class="num">24</td>', '<td class="num">16</td>', '<td class="num">40</td>']
    assert all(number in quota_row for number in numbers)
    assert "Speech" not in section


def test_a_member_sees_what_their_project_is_allowed(member, world):
    page = _home(member)
    assert _shown(page) == [MEMBER_SECTION]
    section = page.split(MEMBER_SECTION)[1].split("</section>")[0]
    assert ">Vision</a>" in section and ">Key project</a>" in section


def test_a_project_without_a_tier_shows_the_default(outsider, ops, world):
    services.membership_set(
        project=world.speech, member=outsider, role=ProjectRole.MEMBER, user=ops, reason=REASON
    )
    section = _home(outsider).split(MEMBER_SECTION)[1].split("</section>")[0]
    assert '>Regular</a> <span class="muted">(the default tier)</span>' in section


def test_someone_in_no_project_is_pointed_to_the_rules(outsider, world):
    page = _home(outsider)
    assert _shown(page) == []
    assert "You are not in a project yet" in page


def test_ops_who_also_leads_a_project_sees_both(ops, world):
    services.membership_set(
        project=world.speech, member=ops, role=ProjectRole.LEAD, user=ops, reason=REASON
    )
    assert _shown(_home(ops)) == [*OPS_SECTIONS, OWNER_SECTION, LEAD_SECTION]


@pytest.mark.parametrize("persona", ["ops", "approver", "lead", "member", "outsider"])
def test_the_home_page_renders_in_chinese(request, world, persona):
    user = request.getfixturevalue(persona)
    by_header = _home(user, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert '<html lang="zh-hans">' in by_header
    client = login(user)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    assert b'<html lang="zh-hans">' in client.get(reverse("home")).content


def test_the_language_switch_returns_to_the_same_page(member, world):
    client = login(member)
    page = client.get(reverse("tier_list")).content.decode()
    assert f'action="{reverse("set_language")}"' in page
    assert f'name="next" value="{reverse("tier_list")}"' in page
    response = client.post(
        reverse("set_language"), {"language": "zh-hans", "next": reverse("tier_list")}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("tier_list")
    assert b'<html lang="zh-hans">' in client.get(reverse("tier_list")).content


def test_the_sign_in_page_has_the_language_switch(db):
    page = Client().get(reverse("login")).content.decode()
    assert f'action="{reverse("set_language")}"' in page
    assert 'value="zh-hans"' in page
    assert 'name="username"' in page


def test_plotly_js_is_served_from_the_installed_package(db):
    url = reverse("plotly_js", args=[plotly.__version__])
    response = Client().get(url, HTTP_ACCEPT_ENCODING="gzip, br")
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert "immutable" in response["Cache-Control"]
    assert b"plotly.js v" in gzip.decompress(response.content)[:200]
    plain = Client().get(url)
    assert plain.content.startswith(b"/**") and "Content-Encoding" not in plain
    assert Client().get(reverse("plotly_js", args=["0.0.1"])).status_code == 404


def test_an_active_tier_upgrade_shows_on_the_home_and_project_pages(lead, world):
    """What a project is allowed is read from the effective rules: grants in force count."""
    now = timezone.now()
    services.grant_create(
        user=world.ops,
        reason=REASON,
        project=world.vision,
        terms=Terms(
            kind=GrantKind.PRIORITY_UPGRADE,
            tier=world.production,
            starts_at=now - timedelta(hours=1),
            ends_at=now + timedelta(days=1),
        ),
    )
    section = _home(lead).split(LEAD_SECTION)[1].split("</section>")[0]
    assert ">Production service</a>" in section
    assert "(raised by a grant in force now)" in section
    allowed = section.split("Allowed tiers")[1].split("</dd>")[0]
    assert "Production service" in allowed and "Key project" in allowed
    project = login(lead).get(reverse("project_detail", args=["vision"])).content.decode()
    chips = project.split("Allowed tiers")[1].split("</section>")[0]
    assert "Production service" in chips and "Key project" in chips


HOME_QUERIES_OPS_FRESH = 10  # pinned below
HOME_QUERIES_OPS = 3


def test_the_ops_home_page_costs_a_fixed_number_of_queries(ops, world, today):
    """Pinned. Read afresh: session, user, the fingerprint, the pools' capacities and
    guarantees (2), the tiers ops own (without the tiers they may preempt), the tiers due
    (read once: ops' own due tiers are among them), memberships, the latest review, the inbox
    and its approvals; more projects, quotas and tiers due cost no more. Kept (nothing
    changed since): session, user, the fingerprint."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = login(ops)
    with CaptureQueriesContext(connection) as first:
        assert client.get(reverse("home")).status_code == 200
    with CaptureQueriesContext(connection) as kept:
        assert client.get(reverse("home")).status_code == 200
    for n in range(3):
        project = services.project_create(
            user=ops, reason=REASON, slug=f"extra-{n}", name=f"Extra {n}", tier=world.key
        )
        services.quota_create(
            user=ops,
            reason=REASON,
            project=project,
            pool=world.training,
            flavor=world.h100,
            guarantee=1,
            preemption_class=world.vision_a100.preemption_class,
        )
    for tier in (world.key, world.regular):
        services.tier_update(
            tier=tier,
            user=ops,
            reason=REASON,
            data={"last_reviewed_on": today - timedelta(days=85)},
        )
    with CaptureQueriesContext(connection) as second:
        page = client.get(reverse("home")).content.decode()
    assert "Key project" in page
    assert len(first) == len(second) == HOME_QUERIES_OPS_FRESH, [
        q["sql"][:100] for q in second.captured_queries
    ]
    assert len(kept) == HOME_QUERIES_OPS, [q["sql"][:100] for q in kept.captured_queries]


def test_the_kept_home_page_is_read_again_after_any_change_it_shows(ops, lead, world, today):
    """The kept parts follow every change they show: a quota's guarantee (the pools' usage),
    a tier's review date (tiers due); the reader's language is part of the key."""
    client = login(ops)
    before = html.unescape(client.get(reverse("home")).content.decode())
    assert "Key project" not in before.split('id="reviews-due"')[1].split("</section>")[0]
    services.quota_update(quota=world.vision_a100, user=ops, reason=REASON, data={"guarantee": 33})
    services.tier_update(
        tier=world.key,
        user=ops,
        reason=REASON,
        data={"last_reviewed_on": today - timedelta(days=85)},
    )
    after = html.unescape(client.get(reverse("home")).content.decode())
    assert "Key project" in after.split('id="reviews-due"')[1].split("</section>")[0]
    assert after.split('id="pool-capacity"')[1] != before.split('id="pool-capacity"')[1]
    chinese = client.get(reverse("home"), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "Key project" in html.unescape(chinese)
    assert chinese != client.get(reverse("home")).content.decode()
