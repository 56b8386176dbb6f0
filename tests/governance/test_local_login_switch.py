"""Local passwords can be switched off (ARBITER_LOCAL_LOGIN=false), leaving the break-glass
accounts named in ARBITER_BREAK_GLASS_USERS."""

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def sign_in(username: str) -> Client:
    client = Client()
    client.post(reverse("login"), {"username": username, "password": "pw-" + username})
    return client


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_passwords_work_by_default(ops, member):
    assert signed_in(sign_in("member"))
    page = Client().get(reverse("login")).content.decode()
    assert 'name="password"' in page and "sign-in-provider" not in page


def test_switched_off_only_break_glass_accounts_sign_in(settings, ops, member):
    settings.ARBITER_LOCAL_LOGIN = False
    settings.ARBITER_BREAK_GLASS_USERS = ["ops"]
    assert not signed_in(sign_in("member"))
    assert signed_in(sign_in("ops"))
    # The form is hidden unless asked for (?break-glass).
    assert 'name="password"' not in Client().get(reverse("login")).content.decode()
    page = Client().get(reverse("login") + "?break-glass").content.decode()
    assert 'name="password"' in page


def test_switched_off_an_existing_password_session_ends(settings, member):
    client = sign_in("member")
    assert client.get(reverse("project_list")).status_code == 200
    settings.ARBITER_LOCAL_LOGIN = False
    assert client.get(reverse("project_list")).status_code == 302
