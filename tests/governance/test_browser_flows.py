"""End-to-end: the real UI in headless Chromium (Debian's package, driven by Playwright).

No browser is downloaded: Playwright drives the system Chromium through ``executable_path``.
Locally the tests skip when Chromium is missing; in CI (``CI=true``) they must run.

The Content-Security-Policy is on (as in production): every test fails if the browser
reports a violation of it (a ``securitypolicyviolation`` event or a console message).
"""

import os
import re

import pytest

from governance.models import Quota
from tests.conftest import chromium_path, require_service

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser():
    executable = chromium_path()
    require_service("Chromium", executable is not None, "install Debian's chromium package")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the test's own database
    # calls are synchronous and safe here.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


# Runs in every document before its own scripts (Playwright injects it past the CSP).
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  window.arbiterCspViolation(
    `${event.violatedDirective} ${event.blockedURI} ${event.sourceFile}:${event.lineNumber}`
  );
});
"""


@pytest.fixture
def csp_violations() -> list[str]:
    return []


@pytest.fixture
def page(browser, csp_violations):
    context = browser.new_context(locale="en-US")
    context.expose_function("arbiterCspViolation", lambda text: csp_violations.append(text))
    context.add_init_script(REPORT_VIOLATIONS)
    page = context.new_page()
    page.on(
        "console",
        lambda message: (
            csp_violations.append(message.text)
            if "Content Security Policy" in message.text
            else None
        ),
    )
    page.set_default_timeout(15_000)
    yield page
    page.wait_for_timeout(100)  # let a last violation event arrive
    context.close()
    assert csp_violations == [], "the page broke its Content-Security-Policy"


def sign_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", f"pw-{username}")
    page.click("form.form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


def test_sign_in_and_switch_language(page, live_server, world):
    sign_in(page, live_server, "ops")
    assert page.locator("html").get_attribute("lang") == "en"
    assert page.locator("nav.site-nav").is_visible()

    page.goto(f"{live_server.url}/pools/")
    page.click("button[name=language][value=zh-hans]")
    page.wait_for_load_state()
    assert page.url == f"{live_server.url}/pools/"
    assert page.locator("html").get_attribute("lang") == "zh-hans"
    assert "资源池" in page.locator("nav.site-nav").inner_text()

    page.click("button[name=language][value=en]")
    page.wait_for_load_state()
    assert page.locator("html").get_attribute("lang") == "en"
    assert "Pools" in page.locator("nav.site-nav").inner_text()


def test_ops_changes_a_quota_with_a_reason_and_sees_it_in_the_history(
    browser, page, live_server, world, ops2
):
    quota = world.vision_a100
    sign_in(page, live_server, "ops")

    page.goto(f"{live_server.url}/quotas/{quota.pk}/edit/")
    page.fill("input[name=guarantee]", "30")
    page.fill("textarea[name=reason]", "Model v3 deadline in March")
    page.click("form.form button[type=submit]")
    page.wait_for_url(re.compile(r".*/changes/\d+/$"))
    change_url = page.url
    plan = page.locator("main").inner_text()
    assert "Proposed" in plan and "24" in plan and "30" in plan
    assert "You proposed this change: someone else must approve it." in plan
    assert page.locator("button", has_text="Approve").count() == 0
    assert Quota.objects.get(pk=quota.pk).guarantee == 24

    # A second operator approves and applies it, in a browser of their own.
    context = browser.new_context(locale="en-US")
    other = context.new_page()
    sign_in(other, live_server, "ops2")
    other.goto(change_url)
    other.click("button:has-text('Approve')")
    other.wait_for_url(change_url)
    other.click("button:has-text('Apply')")
    other.wait_for_url(change_url)
    assert "Applied change" in other.locator("main").inner_text()
    context.close()

    assert Quota.objects.get(pk=quota.pk).guarantee == 30
    page.goto(f"{live_server.url}/quotas/{quota.pk}/history/")
    history = page.locator("main").inner_text()
    assert "Model v3 deadline in March" in history
    assert "24" in history and "30" in history
    assert "Ops2" in history
    page.click("a.timeline__change")
    page.wait_for_url(change_url)


def test_a_rejected_edit_shows_the_numbers_and_keeps_the_input(page, live_server, world):
    quota = world.speech_a100
    sign_in(page, live_server, "ops")

    page.goto(f"{live_server.url}/quotas/{quota.pk}/edit/")
    page.fill("input[name=guarantee]", "60")
    page.fill("textarea[name=reason]", "Too much")
    page.click("form.form button[type=submit]")

    body = page.locator("main").inner_text()
    assert "64" in body and "84" in body
    assert page.input_value("input[name=guarantee]") == "60"
    assert Quota.objects.get(pk=quota.pk).guarantee == 16


def test_a_member_reads_rules_but_cannot_edit(page, live_server, world):
    sign_in(page, live_server, "member")

    page.goto(f"{live_server.url}/quotas/{world.vision_a100.pk}/")
    assert "Vision" in page.locator("main").inner_text()
    assert page.locator(f"a[href$='/quotas/{world.vision_a100.pk}/edit/']").count() == 0
    response = page.goto(f"{live_server.url}/quotas/{world.vision_a100.pk}/edit/")
    assert response.status == 403


def test_every_page_passes_the_content_security_policy(page, live_server, world, csp_violations):
    sign_in(page, live_server, "ops")
    quota = world.vision_a100
    paths = [
        "/",
        "/projects/",
        "/projects/vision/",
        "/projects/vision/members/",
        "/pools/",
        "/pools/training/",
        "/flavors/a100-80g/",
        "/tiers/",
        "/tiers/key/",
        "/tiers/key/edit/",
        "/preemption-classes/cautious/",
        f"/quotas/{quota.pk}/",
        f"/quotas/{quota.pk}/edit/",
        f"/quotas/{quota.pk}/history/",
        "/changes/",
        "/requests/",
        "/requests/new/",
        "/people/",
        "/people/member/",
        "/people/member/edit/",
        "/clusters/",
        "/api/docs/",
        "/admin/",
        "/admin/governance/user/add/",
    ]
    for path in paths:
        response = page.goto(f"{live_server.url}{path}")
        assert response is not None
        assert response.status < 400, path
        assert "script-src 'self'" in response.headers["content-security-policy"], path
        page.wait_for_load_state("load")
    assert page.url.endswith("/admin/governance/user/add/")
    # The home page drew its chart with plotly from this site.
    page.goto(f"{live_server.url}/")
    page.wait_for_selector(".chart .main-svg")
    assert csp_violations == []


def test_an_inline_script_is_blocked_and_reported(browser, live_server, world):
    """The detector above can fail: an inline script on a page is refused and reported."""
    violations: list[str] = []
    context = browser.new_context(locale="en-US")
    context.expose_function("arbiterCspViolation", lambda text: violations.append(text))
    context.add_init_script(REPORT_VIOLATIONS)
    page = context.new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.evaluate(
        """() => {
            const script = document.createElement("script");
            script.textContent = "window.inlineRan = true;";
            document.body.appendChild(script);
        }"""
    )
    page.wait_for_timeout(200)
    assert page.evaluate("() => window.inlineRan === true") is False
    assert any("script-src" in violation for violation in violations), violations
    context.close()
