"""The personal API token page: each person makes, replaces and revokes their own token; the
key is shown once; nobody can make or remove a token of someone else."""

import re

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.conftest import login

pytestmark = pytest.mark.django_db
URL = "/accounts/token/"


def _shown_key(response) -> str | None:
    match = re.search(r'data-testid="token-key">([0-9a-f]{40})<', response.content.decode())
    return match.group(1) if match else None


def _api_status(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get(reverse("api_project_list")).status_code


def test_the_page_is_for_signed_in_people_only(client):
    assert reverse("api_token") == URL
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert client.post(URL, {"action": "rotate"}).status_code == 302
    assert not Token.objects.exists()


@pytest.mark.parametrize("persona", ["ops", "approver", "lead", "member", "outsider"])
def test_everyone_makes_their_own_token_shown_once(request, persona):
    user = request.getfixturevalue(persona)
    client = login(user)
    assert "You have no API token." in client.get(URL).content.decode()

    made = client.post(URL, {"action": "rotate"})

    assert made.status_code == 200
    assert made["Cache-Control"].startswith("max-age=0")
    key = _shown_key(made)
    assert key == Token.objects.get(user=user).key
    assert _api_status(key) == 200
    later = client.get(URL)
    assert _shown_key(later) is None and key not in later.content.decode()
    assert "You have a token" in later.content.decode()


def test_replacing_stops_the_old_key(lead):
    client = login(lead)
    old = _shown_key(client.post(URL, {"action": "rotate"}))

    new = _shown_key(client.post(URL, {"action": "rotate"}))

    assert new and new != old
    assert Token.objects.filter(user=lead).count() == 1
    assert _api_status(old) == 401
    assert _api_status(new) == 200


def test_revoking_stops_the_key(member):
    client = login(member)
    key = _shown_key(client.post(URL, {"action": "rotate"}))

    response = client.post(URL, {"action": "revoke"}, follow=True)

    assert "Your API token was revoked." in response.content.decode()
    assert not Token.objects.filter(user=member).exists()
    assert _api_status(key) == 401


def test_nobody_makes_or_revokes_a_token_for_someone_else(ops, member, ci_token):
    """The page takes no user: whatever is posted, only the signed-in person's token moves."""
    client = login(ops)
    client.post(URL, {"action": "rotate", "user": member.pk, "username": member.username})
    assert not Token.objects.filter(user=member).exists()
    assert Token.objects.filter(user=ops).exists()

    client.post(URL, {"action": "revoke", "user": ci_token.user_id})
    assert Token.objects.filter(pk=ci_token.pk).exists()
    assert not Token.objects.filter(user=ops).exists()


@pytest.mark.parametrize("action", ["", "delete-all", "create"])
def test_an_unknown_action_changes_nothing(member, action):
    client = login(member)
    response = client.post(URL, {"action": action}, follow=True)

    assert response.status_code == 200
    assert "Choose to make, replace or revoke your token." in response.content.decode()
    assert not Token.objects.exists()


def test_the_header_links_to_the_token_page(member):
    page = login(member).get(reverse("home")).content.decode()
    assert f'href="{URL}"' in page
