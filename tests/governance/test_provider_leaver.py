"""A person the identity provider disables loses everything they hold here, whatever their
password: API tokens (at their next use, or by the beat's sweep within the recheck interval,
used or not), page sessions (begun through the provider or with a password), a password
sign-in; they and ops get a mail, their history a row. And the callback's ``iss`` (RFC 9207)
must be there when the provider advertises it.

Driven against the real provider (tests/oidc_provider.py): a browser's sign-in made with
``requests`` through the live server, people disabled by rewriting the provider's file.
"""

import re

import pytest
import requests
from django.core import mail
from django.test import Client
from django.urls import reverse

from governance import services, tasks
from governance.models import ApiToken, ProviderIdentity, User
from tests.oidc_provider import provider_browse

pytestmark = pytest.mark.django_db(transaction=True)


def _sign_in(provider, live_server, username: str = "ana") -> User:
    answer = provider_browse(provider, live_server.url, username, f"{username}-password")
    assert answer.status_code == 302 and "/accounts/" not in answer.headers["Location"], answer.text
    return User.objects.get(provider_identities__issuer=provider.issuer, username=username)


def _api(live_server, key: str) -> requests.Response:
    return requests.get(
        f"{live_server.url}/api/v1/projects/",
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    )


def _password_sign_in(
    live_server, username: str, password: str
) -> tuple[requests.Session, requests.Response]:
    """The sign-in page's password form (302 when it signs in, the page again when not)."""
    browser = requests.Session()
    browser.get(f"{live_server.url}/accounts/login/", timeout=10)
    answer = browser.post(
        f"{live_server.url}/accounts/login/",
        data={
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
        },
        headers={"Referer": f"{live_server.url}/accounts/login/"},
        allow_redirects=False,
        timeout=10,
    )
    return browser, answer


def test_a_callback_without_iss_is_refused_when_the_provider_advertises_it(
    provider, live_server, world
):
    discovery = requests.get(f"{provider.issuer}/.well-known/openid-configuration", timeout=10)
    assert discovery.json()["authorization_response_iss_parameter_supported"] is True

    def without_iss(params: dict) -> dict:
        assert params.pop("iss") == provider.issuer  # the provider sent it
        return params

    answer = provider_browse(provider, live_server.url, "wei", "wei-password", callback=without_iss)
    assert answer.status_code == 400
    assert 'id="sign-in-refused"' in answer.text
    assert "lacks the “iss” parameter" in answer.text and "RFC 9207" in answer.text
    assert not User.objects.filter(username="wei").exists()
    assert not ProviderIdentity.objects.exists()
    # The same answer with its iss signs in (the control).
    assert _sign_in(provider, live_server, "wei").username == "wei"


def test_a_leaver_with_a_password_and_a_token_loses_both_at_the_next_use(
    provider, live_server, world, settings, ops
):
    ana = _sign_in(provider, live_server)
    # A password of their own (a local account linked, or one set before this rule): it
    # changes nothing below.
    services.user_password_set(person=ana, password="a-long-own-secret-81")
    token = services.personal_token_create(
        user=ana, name="laptop", scopes=["read"], expires_in_days=365
    )
    settings.ARBITER_OIDC_RECHECK_MINUTES = 0
    assert _api(live_server, token.key).status_code == 200
    # A page session begun with the password.
    browser, signed_in = _password_sign_in(live_server, "ana", "a-long-own-secret-81")
    assert signed_in.status_code == 302, signed_in.text
    assert browser.get(f"{live_server.url}/projects/", timeout=10).url.endswith("/projects/")
    mail.outbox.clear()

    provider.set_person("ana", disabled=True)
    answer = _api(live_server, token.key)
    assert answer.status_code == 401
    assert "gone or disabled" in answer.text
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    # The password session ends too, and the password no longer signs in.
    assert "/accounts/login/" in browser.get(f"{live_server.url}/projects/", timeout=10).url
    assert _password_sign_in(live_server, "ana", "a-long-own-secret-81")[1].status_code == 200
    # The history of the person and of the token say why; the person and ops are told.
    row = ana.history.first()
    assert row.history_user.username == "arbiter"
    assert "gone or disabled" in row.history_change_reason
    assert "1 API token(s) were revoked" in row.history_change_reason
    assert (
        "gone or disabled"
        in ApiToken.objects.get(pk=token.pk).history.first().history_change_reason
    )
    to_ana = [m for m in mail.outbox if m.to == ["ana@example.com"]]
    assert len(to_ana) == 1 and "disabled your account" in to_ana[0].subject
    assert "revoked the 1 API token" in to_ana[0].body
    to_ops = [m for m in mail.outbox if m.to == [ops.email]]
    assert len(to_ops) == 1 and "lost access" in to_ops[0].subject


def test_the_sweep_revokes_an_unused_token_within_the_interval(
    provider, live_server, world, settings
):
    wei = _sign_in(provider, live_server, "wei")
    token = services.personal_token_create(user=wei, name="ci", scopes=["read"])
    settings.ARBITER_OIDC_RECHECK_MINUTES = 15
    # Confirmed at the sign-in: not asked again before the interval.
    assert tasks.identities_recheck() == []
    provider.set_person("wei", disabled=True)
    assert tasks.identities_recheck() == []
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None
    # The interval (less the sweep's minute) has passed: asked, and everything ends.
    identity = ProviderIdentity.objects.get(user=wei)
    identity.checked_at = identity.checked_at.replace(year=identity.checked_at.year - 1)
    identity.save(update_fields=["checked_at"])
    mail.outbox.clear()
    assert tasks.identities_recheck() == [identity.pk]
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    # In wei's language (zh-CN at the provider).
    (to_wei,) = [m for m in mail.outbox if m.to == ["wei@example.com"]]
    assert to_wei.subject == "您的 Arbiter 访问权限已终止：身份提供方停用了您的账号"
    assert "gone or disabled" in wei.history.first().history_change_reason
    # Idempotent: nobody is asked about again, nothing is mailed twice.
    mail.outbox.clear()
    assert tasks.identities_recheck() == []
    assert mail.outbox == []
    assert _api(live_server, token.key).status_code == 401


def test_no_password_link_for_an_account_of_the_provider(provider, live_server, world):
    ana = _sign_in(provider, live_server)
    answer = Client().post(reverse("password_reset"), {"email": ana.email})
    assert answer.status_code == 302  # the same answer as for any address
    assert mail.outbox == []
    # A link made before the account was linked no longer works, and says why.
    from django.contrib.auth.tokens import default_token_generator
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    link = reverse(
        "password_reset_confirm",
        args=[urlsafe_base64_encode(force_bytes(ana.pk)), default_token_generator.make_token(ana)],
    )
    page = Client().get(link, follow=True)
    html = page.content.decode()
    assert 'id="password-link-refused"' in html
    assert re.search(r"signs in through the identity provider: Arbiter sends it no password", html)
    assert not services.user_invitation_send(person_id=ana.pk)
    assert mail.outbox == []
