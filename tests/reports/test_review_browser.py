"""End-to-end: the demo's ops dashboard of the monthly review in headless Chromium, in
English and in Chinese: charts drawn by plotly.js (served locally), findings, CSV links, and
no Content-Security-Policy violation."""

from io import StringIO

import pytest
from django.core.management import call_command

from governance import services as rules
from tests.governance.test_browser_flows import (  # noqa: F401 (fixtures)
    browser,
    csp_violations,
    page,
    sign_in,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo(db):
    rules.demo_seed(password="pw")
    call_command("seed_demo_workload", "--days", "92", stdout=StringIO())
    call_command("seed_demo_reviews", stdout=StringIO())


def test_the_demo_dashboard_in_english_and_chinese(page, live_server, demo):  # noqa: F811
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "ops")
    page.fill("input[name=password]", "pw")
    page.click("form.form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    page.click("nav.site-nav a[href='/monthly-reviews/']")
    rows = page.locator("main table tbody tr")
    assert rows.count() == 3
    rows.first.locator("a").first.click()
    page.wait_for_selector(".chart--drawn")
    page.wait_for_selector(".chart--drawn .main-svg")
    assert page.locator(".chart--drawn").count() == 7
    assert page.locator("#findings li.finding").count() > 0
    assert page.locator("#findings a", has_text="Propose a change").count() > 0
    assert_tables_fit(page)
    csv_links = page.locator("a.csv-link")
    assert csv_links.count() >= 6
    with page.expect_download() as download:
        page.locator("a.csv-link", has_text="Whole review as CSV").click()
    assert download.value.suggested_filename.endswith(".csv")

    page.click("button[name=language][value=zh-hans]")
    page.wait_for_load_state()
    assert page.locator("html").get_attribute("lang") == "zh-hans"
    page.wait_for_selector(".chart--drawn .main-svg")
    main = page.locator("main").inner_text()
    assert "月度评审" in main and "发现" in main
    assert page.locator(".chart--drawn").count() == 7
    assert page.locator("a.csv-link", has_text="CSV").count() >= 6
    assert page.locator("#findings li.finding").count() > 0
    assert_tables_fit(page)
    # Every category, axis and class name in Chinese: no English word of them is left in the
    # open tables or on the charts' axes and legends.
    page.locator("details.review-figure__table").evaluate_all(
        "nodes => nodes.forEach(node => { node.open = true; })"
    )
    tables = page.locator(
        "#table-waits_by_tier, #table-waits_by_category, #table-preemptions"
    ).all_inner_texts()
    charts = page.locator(
        ".chart--drawn :is(.xtick, .ytick, .g-xtitle, .g-ytitle)"
    ).all_text_contents()
    assert charts
    assert len(tables) == 3  # an id gone from the page would leave nothing to check
    for english in ("Resource", "Quota", "Forbidden", "Cautious", "Allowed", "Jobs", "Tier"):
        assert not any(english in text for text in tables), english
    for english in ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                    "Nov", "Dec", "minutes", "GPU-hours", "wait"):  # fmt: skip
        assert not any(english in text for text in charts), english


def assert_tables_fit(page) -> None:  # noqa: F811
    """At 1,280 px every table of the review shows all its columns: none scrolls sideways."""
    page.set_viewport_size({"width": 1280, "height": 900})
    page.locator("details.review-figure__table").evaluate_all(
        "nodes => nodes.forEach(node => { node.open = true; })"
    )
    clipped = page.locator(".table-wrap").evaluate_all(
        "nodes => nodes.filter(node => node.scrollWidth > node.clientWidth + 1)"
        ".map(node => node.querySelector('table').id)"
    )
    assert clipped == []
