"""Bad input at the sign-in through the identity provider: each refused with a clear page (in
the reader's language), logged, and nothing created.

The flow is started for real (state, nonce and PKCE in the session, the provider's endpoints
from its discovery document) and the ID tokens are checked against the real provider's
published keys (tests/oidc_provider.py). For the back-channel cases (a forged, expired or
wrong-audience token) the token endpoint's answer is replaced by a token the test mints:
signed with the provider's own key (expired, another audience, another issuer, another
nonce, a missing claim) or with another key (forged). An attacker between Arbiter and the
provider could send exactly these.
"""

import logging
import time
from urllib.parse import parse_qs, urlsplit

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.test import Client
from django.urls import reverse

from governance.models import ProviderIdentity, User
from governance.toolkit.oidc import ProviderBackend

pytestmark = pytest.mark.django_db(transaction=True)


def start(client: Client, provider) -> tuple[str, str]:
    response = client.get(reverse("oidc_start"))
    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert f"{location.scheme}://{location.netloc}" == provider.issuer
    query = parse_qs(location.query)
    return query["state"][0], query["nonce"][0]


def test_the_start_sends_state_nonce_and_a_pkce_challenge(provider):
    client = Client()
    response = client.get(reverse("oidc_start"))
    query = parse_qs(urlsplit(response["Location"]).query)
    assert query["response_type"] == ["code"] and query["client_id"] == ["arbiter"]
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) >= 43
    assert len(query["state"][0]) >= 32 and len(query["nonce"][0]) >= 32
    assert "groups" in query["scope"][0].split()


def refused(response, caplog, text: str) -> None:
    assert response.status_code in (400, 403)
    html = response.content.decode()
    assert 'id="sign-in-refused"' in html and text in html, html
    assert any("refused" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize(
    ("params", "text"),
    [
        ({"code": "x", "state": "never-started"}, "already used"),
        ({"code": "x", "state": "{state}", "iss": "https://evil.example.com"}, "does not trust"),
        ({"error": "access_denied", "state": "{state}"}, "did not sign you in: access_denied"),
    ],
)
def test_a_bad_front_channel_answer_is_refused(provider, caplog, params, text):
    caplog.set_level(logging.WARNING, "arbiter.identity")
    client = Client()
    state, _nonce = start(client, provider)
    before = User.objects.count()
    spent = params["state"] == "{state}"
    params = {name: value.format(state=state) for name, value in params.items()}
    refused(client.get(reverse("oidc_callback"), params), caplog, text)
    assert User.objects.count() == before
    if spent:
        # The state is spent either way: the genuine answer cannot follow.
        response = client.get(
            reverse("oidc_callback"), {"code": "x", "state": state, "iss": provider.issuer}
        )
        refused(response, caplog, "already used")


def good_claims(nonce: str) -> dict:
    return {
        "sub": "u-2001",
        "nonce": nonce,
        "preferred_username": "lin",
        "email": "lin@example.com",
        "groups": ["team-vision"],
    }


OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.mark.parametrize(
    ("change", "key", "text"),
    [
        ({}, OTHER_KEY, "not signed with the provider"),
        ({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, None, "expired"),
        ({"aud": "someone-else"}, None, "another application"),
        ({"aud": ["arbiter", "someone-else"], "azp": "someone-else"}, None, "another application"),
        ({"iss": "https://evil.example.com"}, None, "does not trust"),
        ({"nonce": "another-sign-in"}, None, "nonce does not match"),
        ({"groups": None}, None, "did not send “groups”"),
        ({"sub": None}, None, "did not send “sub”"),
    ],
)
def test_a_bad_id_token_is_refused_and_creates_nothing(
    provider, caplog, monkeypatch, change, key, text
):
    caplog.set_level(logging.WARNING, "arbiter.identity")
    client = Client()
    state, nonce = start(client, provider)
    claims = {**good_claims(nonce), **change}
    claims = {name: value for name, value in claims.items() if value is not None}
    token = provider.mint(claims, key=key)
    monkeypatch.setattr(ProviderBackend, "get_token", lambda self, payload: {"id_token": token})
    before = User.objects.count()
    response = client.get(
        reverse("oidc_callback"), {"code": "x", "state": state, "iss": provider.issuer}
    )
    refused(response, caplog, text)
    assert User.objects.count() == before
    assert not ProviderIdentity.objects.exists()


def test_the_same_token_well_formed_signs_in(provider, monkeypatch, world):
    """The control of the cases above: nothing but their one fault was wrong."""
    client = Client()
    state, nonce = start(client, provider)
    token = provider.mint(good_claims(nonce))
    monkeypatch.setattr(ProviderBackend, "get_token", lambda self, payload: {"id_token": token})
    response = client.get(
        reverse("oidc_callback"), {"code": "x", "state": state, "iss": provider.issuer}
    )
    assert response.status_code == 302 and response["Location"] == "/"
    lin = User.objects.get(username="lin")
    assert lin.memberships.get().project == world.vision


def test_a_refusal_reads_in_chinese(provider, caplog, monkeypatch):
    client = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    state, nonce = start(client, provider)
    token = provider.mint({**good_claims(nonce), "aud": "someone-else"})
    monkeypatch.setattr(ProviderBackend, "get_token", lambda self, payload: {"id_token": token})
    response = client.get(
        reverse("oidc_callback"), {"code": "x", "state": state, "iss": provider.issuer}
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert "登录被拒绝" in html and "此登录令牌是签发给另一个应用的。" in html
