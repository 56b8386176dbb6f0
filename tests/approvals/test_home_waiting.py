"""The home page lists the requests waiting for its reader: an approver's decisions, and a
lead's projects' requests waiting for someone else."""

from django.urls import reverse

from tests.approvals.conftest import upgrade
from tests.conftest import login


def test_the_approver_and_the_lead_see_what_waits_on_their_home_page(
    world, policies, lead, member, ops, approver
):
    # Production: its business owner, ``approver``, and one of ops decide.
    waiting = upgrade(world, lead, project=world.vision, tier=world.production)
    draft = upgrade(world, lead, project=world.vision, tier=world.production, submit=False)

    home = login(approver).get(reverse("home")).content.decode()
    assert 'id="waiting-for-you"' in home
    assert reverse("request_detail", args=[waiting.pk]) in home
    assert reverse("request_detail", args=[draft.pk]) not in home

    lead_home = login(lead).get(reverse("home")).content.decode()
    assert 'id="waiting-for-you"' not in lead_home  # a lead decides nothing
    assert 'id="your-projects-waiting"' in lead_home
    assert reverse("request_detail", args=[waiting.pk]) in lead_home

    member_home = login(member).get(reverse("home")).content.decode()
    assert 'id="your-projects-waiting"' not in member_home
