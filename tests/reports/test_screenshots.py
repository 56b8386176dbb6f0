"""Screenshots of the demo (issue 38, done-when): the replay page of the demo's proposed change
and the month-to-date review, in English and in Chinese, at 1,280 px, taken in the headless
Chromium the end-to-end tests drive.

Run ``docs/screenshots/regenerate.sh`` to write them into ``docs/screenshots/`` (it sets
``ARBITER_SCREENSHOTS_DIR``); otherwise they go to the test's temporary folder, and the test
checks that each page drew its charts, speaks its language and fits 1,280 px."""

import os
import struct
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from governance import services as rules
from governance.models import ChangeStatus, RuleChange, User
from queues.models import ReplayStatus
from queues.services import change_replay_start
from queues.services.replay import change_replay_run
from queues.services.workload.rollup import workload_hours_roll_up
from tests.governance.test_browser_flows import (  # noqa: F401 (fixtures)
    browser,
    csp_violations,
    page,
)
from tests.reports.test_review_browser import assert_tables_fit

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WIDTH = 1280


@pytest.fixture
def demo(db):
    rules.demo_seed(password="pw")
    call_command("seed_demo_workload", "--days", "45", stdout=StringIO())
    workload_hours_roll_up()  # as the beat does: this month's figures read the rollup
    change = RuleChange.objects.get(status=ChangeStatus.PROPOSED)
    run, _queued = change_replay_start(change=change, user=User.objects.get(username="ops"))
    run = change_replay_run(replay_id=run.pk)
    assert run is not None and run.status == ReplayStatus.DONE, run and run.error
    return change


@pytest.fixture
def folder(tmp_path) -> Path:
    target = Path(os.environ.get("ARBITER_SCREENSHOTS_DIR") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    return target


def png_width(path: Path) -> int:
    """The width of a PNG, from its header."""
    return int(struct.unpack(">I", path.read_bytes()[16:20])[0])


def shoot(page, url: str, path: Path) -> None:  # noqa: F811
    page.goto(url)
    page.wait_for_load_state("networkidle")
    if page.locator("[data-plotly-figure]").count():
        page.wait_for_selector(".chart--drawn .main-svg")
    page.screenshot(path=str(path), full_page=True)
    assert png_width(path) == WIDTH


def test_the_replay_and_this_months_review_in_both_languages(
    demo,
    live_server,
    page,  # noqa: F811
    folder,
):
    # ``demo`` before ``page``: once Playwright's sync API has started, a fixture's code runs
    # in another context (its greenlet's), where Django's context-local connections opened a
    # second connection that nothing closed (named by the teardown as a session left open).
    page.set_viewport_size({"width": WIDTH, "height": 900})
    # A shared machine may be slow: the speed is benchmarked (bench/replay_page.py), not here.
    page.set_default_timeout(120_000)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "ops")
    page.fill("input[name=password]", "pw")
    page.click("form.form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    pages = {
        "replay-decide": f"{live_server.url}/changes/{demo.pk}/replay/",
        "month-to-date": f"{live_server.url}/monthly-reviews/this-month/",
    }
    for language, switch in (("en", None), ("zh-hans", "zh-hans")):
        if switch:
            page.click(f"button[name=language][value={switch}]")
            page.wait_for_load_state()
        for name, url in pages.items():
            path = folder / f"{name}-{language}-{WIDTH}.png"
            shoot(page, url, path)
            main = page.locator("main").inner_text()
            if name == "replay-decide":
                assert ("Would have triggered" if language == "en" else "是否会触发") in main
            else:
                assert ("Started jobs only" if language == "en" else "仅已开始的作业") in main
                # Both kinds side by side, and still no table scrolls sideways at 1,280 px.
                assert page.locator("#table-waits_by_tier").count() == 1
                assert_tables_fit(page)
