"""End-to-end: signing in through a real OpenID Connect provider (panva's oidc-provider,
started by tests/oidc_provider.py), in headless Chromium, in English and in Chinese.

First sign-in, a group change seen at the next sign-in, sign-out ending the provider's
session, a disabled account refused (at the provider, and for its API token at next use), an
ops claim that only proposes a change, a replayed callback refused (the
other refusals: test_oidc_refusals.py).
"""

import re

import pytest
import requests

from governance.models import (
    ApiToken,
    ChangeStatus,
    Membership,
    ProviderIdentity,
    RuleChange,
    SiteRole,
    User,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def new_page(browser, locale: str):
    context = browser.new_context(locale=locale)
    page = context.new_page()
    page.set_default_timeout(15_000)
    return page


def callback_urls(page) -> list[str]:
    """The addresses the provider sends the browser back to (code, state, iss)."""
    callbacks: list[str] = []
    page.on(
        "request",
        lambda request: (
            callbacks.append(request.url) if "/accounts/oidc/callback/" in request.url else None
        ),
    )
    return callbacks


def provider_sign_in(page, live_server, username: str, password: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.click("#sign-in-provider")
    page.wait_for_url(re.compile(r"^http://127\.0\.0\.1:\d+/interaction/"))
    page.fill("#username", username)
    page.fill("#password", password)
    page.click("#submit")


def sign_out(page) -> None:
    """Arbiter's "Log out", then the provider's own question: its session ends too."""
    page.locator("form.inline-form button[type=submit]").last.click()
    page.click("#logout-yes")
    page.wait_for_url(re.compile(r"/accounts/login/"))


def test_first_sign_in_then_a_group_change_at_the_next(browser, live_server, world, provider):
    page = new_page(browser, "en-US")
    provider_sign_in(page, live_server, "ana", "ana-password")
    page.wait_for_url(f"{live_server.url}/")
    ana = User.objects.get(username="ana")
    assert (ana.first_name, ana.last_name, ana.email) == ("Ana", "Silva", "ana@example.com")
    assert ana.site_role == SiteRole.MEMBER and ana.language == "en"
    assert ProviderIdentity.objects.get(user=ana).subject == "u-1002"
    assert list(Membership.objects.filter(user=ana).values_list("project__slug", flat=True)) == [
        "speech"
    ]
    # The ops group only proposed a change; a second person decides.
    change = RuleChange.objects.get(author=ana)
    assert change.status == ChangeStatus.PROPOSED
    page.goto(f"{live_server.url}/changes/{change.pk}/")
    assert page.locator("body").inner_text().count("ana") >= 1

    # Signing out ends the provider's session too: the next sign-in asks for the password.
    sign_out(page)
    provider.set_person("ana", groups=["team-vision"], family_name="Silva-Costa")
    provider_sign_in(page, live_server, "ana", "ana-password")
    page.wait_for_url(f"{live_server.url}/")
    ana.refresh_from_db()
    assert ana.last_name == "Silva-Costa"
    assert list(Membership.objects.filter(user=ana).values_list("project__slug", flat=True)) == [
        "vision"
    ]
    removed = Membership.history.get(user_id=ana.pk, project_id=world.speech.pk, history_type="-")
    assert "claim “groups” lists no group of speech" in removed.history_change_reason
    assert removed.history_user.username == "arbiter"
    # Still a member: the ops claim left with the group, nothing was granted.
    assert ana.site_role == SiteRole.MEMBER
    page.context.close()


def test_in_chinese_a_first_sign_in_and_an_ops_claim(browser, live_server, world, provider):
    page = new_page(browser, "zh-CN")
    callbacks = callback_urls(page)
    provider.set_person("wei", groups=["team-vision", "arbiter-ops"])
    page.goto(f"{live_server.url}/accounts/login/")
    assert page.locator("#sign-in-provider").inner_text() == "使用您所在组织的账号登录"
    provider_sign_in(page, live_server, "wei", "wei-password")
    page.wait_for_url(f"{live_server.url}/")
    wei = User.objects.get(username="wei")
    assert wei.language == "zh-hans" and wei.site_role == SiteRole.MEMBER
    assert Membership.objects.filter(user=wei, project=world.vision).exists()
    assert RuleChange.objects.filter(author=wei, status=ChangeStatus.PROPOSED).count() == 1
    assert "成员" in page.locator("header.site-header").inner_text()
    # A refusal reads in Chinese too: the same callback again (its state was used).
    response = page.goto(callbacks[0])
    assert response.status == 400
    assert page.locator("h1").inner_text() == "登录被拒绝"
    assert "已被使用过" in page.locator("#sign-in-refused").inner_text()
    page.context.close()


def test_a_disabled_account_is_refused_and_its_token_stops(
    browser,
    live_server,
    world,
    provider,
    settings,
):
    page = new_page(browser, "en-US")
    # Disabled at the provider before any sign-in: refused there, nothing made here.
    provider_sign_in(page, live_server, "gone", "gone-password")
    assert page.locator("#error").inner_text() == "This account is disabled."
    assert not User.objects.filter(username="gone").exists()

    # Signed in once, with an API token; then disabled at the provider.
    provider.set_person("gone", disabled=False)
    provider_sign_in(page, live_server, "gone", "gone-password")
    page.wait_for_url(f"{live_server.url}/")
    gone = User.objects.get(username="gone")
    from governance import services

    token = services.personal_token_create(user=gone, name="laptop", scopes=["read"])
    api = f"{live_server.url}/api/v1/projects/"
    settings.ARBITER_OIDC_RECHECK_MINUTES = 0
    assert requests.get(api, headers={"Authorization": f"Bearer {token.key}"}, timeout=10).ok
    provider.set_person("gone", disabled=True)
    answer = requests.get(api, headers={"Authorization": f"Bearer {token.key}"}, timeout=10)
    assert answer.status_code == 401
    assert "gone or disabled" in answer.text
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    # Their page session ends too.
    page.goto(f"{live_server.url}/projects/")
    assert "/accounts/login/" in page.url
    page.context.close()


def test_a_page_session_ends_when_the_provider_disables_the_account(
    browser, live_server, world, provider, settings
):
    page = new_page(browser, "en-US")
    provider_sign_in(page, live_server, "wei", "wei-password")
    page.wait_for_url(f"{live_server.url}/")
    settings.ARBITER_OIDC_RECHECK_MINUTES = 0
    page.goto(f"{live_server.url}/projects/")
    assert page.url == f"{live_server.url}/projects/"  # the provider confirmed the account
    provider.set_person("wei", disabled=True)
    page.goto(f"{live_server.url}/projects/")
    assert "/accounts/login/" in page.url
    identity = ProviderIdentity.objects.get(user__username="wei")
    assert identity.disabled_at is not None
    # Enabled again at the provider: the next sign-in works and clears the mark.
    provider.set_person("wei", disabled=False)
    # (The provider's own session is still open: it sends the browser straight back, to the
    # page that was asked for.)
    page.click("#sign-in-provider")
    page.wait_for_url(f"{live_server.url}/projects/")
    identity.refresh_from_db()
    assert identity.disabled_at is None
    page.context.close()


def test_a_replayed_callback_is_refused(browser, live_server, world, provider):
    page = new_page(browser, "en-US")
    callbacks = callback_urls(page)
    provider_sign_in(page, live_server, "wei", "wei-password")
    page.wait_for_url(f"{live_server.url}/")
    count = User.objects.count()
    # The same callback again (its state was used): refused, in a page that says so.
    response = page.goto(callbacks[0])
    assert response.status == 400
    assert "already used" in page.locator("#sign-in-refused").inner_text()

    # The refusal signed the browser out of Arbiter.
    page.goto(f"{live_server.url}/projects/")
    assert "/accounts/login/" in page.url
    assert User.objects.count() == count
    page.context.close()


def test_a_group_left_at_the_provider_takes_effect_at_the_next_check(
    browser, live_server, world, provider, settings
):
    """No sign-in needed: the session's check with the provider (a refresh-token grant)
    brings the new groups, and the memberships follow them."""
    page = new_page(browser, "en-US")
    provider_sign_in(page, live_server, "wei", "wei-password")
    page.wait_for_url(f"{live_server.url}/")
    wei = User.objects.get(username="wei")
    assert Membership.objects.filter(user=wei, project=world.vision).exists()
    provider.set_person("wei", groups=["team-speech"])
    settings.ARBITER_OIDC_RECHECK_MINUTES = 0
    page.goto(f"{live_server.url}/projects/")
    assert page.url == f"{live_server.url}/projects/"
    assert list(Membership.objects.filter(user=wei).values_list("project__slug", flat=True)) == [
        "speech"
    ]
    page.context.close()
