"""Personal API tokens at /accounts/token/: each person makes and revokes their own tokens
(name, scopes, expiry); the key is shown once and stored only as a digest; nobody can make or
revoke a token of someone else."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from governance.models import ApiToken
from governance.selectors import token_digest
from tests.conftest import login

pytestmark = pytest.mark.django_db
URL = "/accounts/token/"


def _shown_key(response) -> str | None:
    match = re.search(
        r'data-testid="token-key">(arb_[0-9a-f]{8}_[\w-]{43})<', response.content.decode()
    )
    return match.group(1) if match else None


def _api_status(key: str, keyword: str = "Bearer") -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{keyword} {key}")
    return client.get(reverse("api_project_list")).status_code


def _make(client, **data):
    return client.post(URL, {"action": "create", "name": "script", "scopes": ["read"], **data})


def test_the_page_is_for_signed_in_people_only(client):
    assert reverse("api_token") == URL
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert _make(client).status_code == 302
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("persona", ["ops", "approver", "lead", "member", "outsider"])
def test_everyone_makes_their_own_token_shown_once(request, persona):
    user = request.getfixturevalue(persona)
    client = login(user)
    assert "No tokens." in client.get(URL).content.decode()

    made = _make(client, expires_in_days=30)

    assert made.status_code == 200
    assert made["Cache-Control"].startswith("max-age=0")
    key = _shown_key(made)
    token = ApiToken.objects.get(user=user)
    assert key and key not in str(ApiToken.objects.values_list())  # stored as a digest only
    assert token.digest == token_digest(key) and token.scopes == ["read"]
    assert abs(token.expires_at - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)
    assert _api_status(key) == 200
    assert _api_status(key, "Token") == 200
    later = client.get(URL)
    assert _shown_key(later) is None and key not in later.content.decode()
    assert token.prefix in later.content.decode()


def test_the_expiry_defaults_to_90_days_and_is_capped(member, settings):
    client = login(member)
    _make(client)
    token = ApiToken.objects.get(user=member)
    assert abs(token.expires_at - (timezone.now() + timedelta(days=90))) < timedelta(minutes=1)
    settings.ARBITER_TOKEN_MAX_DAYS = 30
    response = _make(client, expires_in_days=31)
    assert response.status_code == 200 and _shown_key(response) is None
    assert "The token was not made." in response.content.decode()
    assert ApiToken.objects.filter(user=member).count() == 1


def test_a_token_needs_a_scope(member):
    response = _make(login(member), scopes=[])
    assert _shown_key(response) is None
    assert not ApiToken.objects.exists()


def test_revoking_stops_the_key(member):
    client = login(member)
    key = _shown_key(_make(client))
    token = ApiToken.objects.get(user=member)

    response = client.post(URL, {"action": "revoke", "token": token.pk}, follow=True)

    assert "The token was revoked." in response.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is not None and token.revoked_by == member
    assert _api_status(key) == 401


def test_an_expired_token_is_refused(member):
    client = login(member)
    key = _shown_key(_make(client))
    token = ApiToken.objects.get(user=member)
    past = timezone.now() - timedelta(days=1)
    ApiToken.objects.filter(pk=token.pk).update(
        created_at=past - timedelta(days=90), expires_at=past
    )
    response = APIClient().get(reverse("api_project_list"), HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="api"'
    assert "expired" in str(response.json())


def test_a_tampered_secret_is_refused(member):
    key = _shown_key(_make(login(member)))
    assert key is not None
    assert _api_status(key[:-1] + ("A" if key[-1] != "A" else "B")) == 401


def test_nobody_revokes_a_token_of_someone_else(ops, member, ci_token):
    """Only the signed-in person's own tokens are listed and revocable."""
    _make(login(member))
    theirs = ApiToken.objects.get(user=member)
    client = login(ops)
    assert client.post(URL, {"action": "revoke", "token": theirs.pk}).status_code == 404
    assert client.post(URL, {"action": "revoke", "token": ci_token.pk}).status_code == 404
    theirs.refresh_from_db()
    ci_token.refresh_from_db()
    assert theirs.revoked_at is None and ci_token.revoked_at is None
    assert _make(client, user=member.pk).status_code == 200
    assert ApiToken.objects.filter(user=member).count() == 1


def test_last_use_is_recorded_once_a_minute(member, django_assert_num_queries):
    key = _shown_key(_make(login(member)))
    assert key is not None
    _api_status(key)
    token = ApiToken.objects.select_related("usage").get(user=member)
    first = token.usage.last_used_at
    assert token.usage.last_used_address == "127.0.0.1"
    _api_status(key)
    token.usage.refresh_from_db()
    assert token.usage.last_used_at == first


@pytest.mark.parametrize("action", ["", "delete-all", "rotate"])
def test_an_unknown_action_changes_nothing(member, action):
    client = login(member)
    response = client.post(URL, {"action": action}, follow=True)

    assert response.status_code == 200
    assert "Choose to make or revoke a token." in response.content.decode()
    assert not ApiToken.objects.exists()


def test_the_header_links_to_the_token_page(member):
    page = login(member).get(reverse("home")).content.decode()
    assert f'href="{URL}"' in page


def test_the_compiled_lookup_reads_what_the_orm_reads(member, django_assert_num_queries):
    """The lookup is compiled once per process: it reads the token, its user and its last use
    (none yet, then a row) exactly as the ORM's ``select_related`` query does, in one query."""
    from governance.selectors import api_token_authenticate

    key = _shown_key(_make(login(member)))
    assert key is not None
    for _round in ("unused", "used"):
        with django_assert_num_queries(1):
            token, problem = api_token_authenticate(key=key)
        assert token is not None and problem == ""
        orm = ApiToken.objects.select_related("user", "usage").get(pk=token.pk)
        for field in ApiToken._meta.concrete_fields:
            assert getattr(token, field.attname) == getattr(orm, field.attname), field.name
        assert token.expires_at.tzinfo is not None and token.scopes == ["read"]
        with django_assert_num_queries(0):  # the user and the last use came with the token
            assert token.user == member and token.user.username == member.username
            assert getattr(token, "usage", None) == getattr(orm, "usage", None)
        _api_status(key)  # records the last use
    assert token.usage.last_used_address == "127.0.0.1"
    assert api_token_authenticate(key=key.replace("_", "_0", 1)) == (None, "Invalid token.")
