"""The review pages: the ops dashboard (figures, tables, CSV links, findings), the progress
page, the lead's project view, the printable page, with one scoped getter deciding access."""

import csv
import html
import io
import json
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from reports import services
from reports.models import ReviewStatus
from tests.conftest import login

START = datetime(2026, 10, 1, tzinfo=UTC)
END = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture
def built(ops, world, fake_metrics, eager, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        review = services.review_request(user=ops, start=START, end=END)
    review.refresh_from_db()
    assert review.status == ReviewStatus.DONE
    return review


def _page(user, url, **options) -> str:
    response = login(user).get(url, **options)
    assert response.status_code == 200, response.status_code
    return html.unescape(response.content.decode())


def test_the_dashboard_shows_figures_tables_findings_and_csv_links(ops, world, built):
    page = _page(ops, reverse("report_detail", args=[built.pk]))
    for figure in ("waits", "service", "lending", "idle", "preemptions", "exceptions"):
        data = json.loads(
            page.split(f'id="figure-{figure}" type="application/json">')[1].split("</script>")[0]
        )
        assert data["data"], figure
    waits = json.loads(page.split('id="figure-waits" type="application/json">')[1].split("<")[0])
    assert [trace["name"] for trace in waits["data"]][:2] == ["Key project p90", "Key project p50"]
    assert len(waits["layout"]["shapes"]) == 2  # the rule change and the grant
    assert 'id="table-waits_by_tier"' in page and 'id="table-service"' in page
    assert reverse("report_table_csv", args=[built.pk, "service"]) in page
    assert reverse("report_csv", args=[built.pk]) in page
    findings = page.split('id="findings"')[1].split("</section>")[0]
    assert "Starved project" in findings and "Hoarded guarantee" in findings
    assert "Waits over the tier's threshold" in findings
    assert "Exceptions over the policy's count" in findings
    assert reverse("quota_edit", args=[(built.metrics and 1) or 1])[:8] in findings
    assert reverse("tier_edit", args=["key"]) in findings
    assert "Propose a change" in findings


def test_the_dashboard_renders_in_chinese(ops, built):
    page = _page(ops, reverse("report_detail", args=[built.pk]), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert '<html lang="zh-hans">' in page
    assert "月度评审" in page


def test_the_review_page_has_a_pinned_number_of_queries(
    ops, built, django_assert_num_queries, client
):
    client.force_login(ops)
    url = reverse("report_detail", args=[built.pk])
    client.get(url)
    # Session and user, the review, its versions, the reviews to compare with, the twelve
    # months' trend.
    with django_assert_num_queries(6):
        assert client.get(url).status_code == 200


def test_a_queued_review_shows_its_progress_and_refreshes(ops, world, fake_metrics):
    review = services.review_request(user=ops, start=START, end=END)  # not committed: queued
    page = _page(ops, reverse("report_detail", args=[review.pk]))
    assert '<meta http-equiv="refresh" content="3">' in page
    assert 'role="progressbar"' in page
    assert reverse("api_review_status", args=[review.pk]) == (
        f"/api/v1/monthly-reviews/{review.pk}/status/"
    )
    status = login(ops).get(reverse("api_review_status", args=[review.pk])).json()
    assert status["status"] == "queued" and status["progress"] == 0
    # The old path answers the same until its sunset, pointing at the new one.
    old = login(ops).get(f"/api/v1/reviews/{review.pk}/status/")
    assert old.json() == status and old["Sunset"]
    assert old["Link"] == (
        f'<http://testserver/api/v1/monthly-reviews/{review.pk}/status/>; rel="successor-version"'
    )


def test_the_lead_reads_their_project_view_only(lead, member, outsider, ops, built):
    page = _page(lead, reverse("report_project", args=[built.pk, "vision"]))
    assert "Vision" in page and "Starved project" in page
    # A lead cannot edit the rules: they ask for a change with a request for the project.
    assert f'href="{reverse("request_create")}?project=vision&reason=Finding+of' in page
    # The request starts with the finding as its justification.
    (finding,) = [
        item
        for item in login(lead)
        .get(reverse("report_project", args=[built.pk, "vision"]))
        .context["findings"]
        if item["kind"] == "starved"
    ]
    form = login(lead).get(finding["propose_url"]).context["form"]
    assert form.initial["justification"].startswith("Finding of the review")
    assert finding["text"] in form.initial["justification"]
    assert "/edit/" not in page.split('id="findings"')[1].split("</section>")[0]
    assert "Speech" not in page.split('id="findings"')[1].split("</section>")[0]
    assert login(lead).get(reverse("report_project", args=[built.pk, "speech"])).status_code == 403
    assert login(lead).get(reverse("report_detail", args=[built.pk])).status_code == 403
    assert (
        login(member).get(reverse("report_project", args=[built.pk, "vision"])).status_code == 403
    )
    assert login(outsider).get(reverse("report_list")).status_code == 403
    assert login(ops).get(reverse("report_project", args=[built.pk, "nobody"])).status_code == 404
    assert login(ops).get(reverse("report_detail", args=[built.pk + 99])).status_code == 404
    csv_url = reverse("report_project_table_csv", args=[built.pk, "speech", "service"])
    assert login(lead).get(csv_url).status_code == 403
    list_page = _page(lead, reverse("report_list"))
    assert reverse("report_project", args=[built.pk, "vision"]) in list_page


def _csv(response) -> list[list[str]]:
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))


def test_each_figure_and_the_whole_review_download_as_csv(ops, lead, built):
    client = login(ops)
    rows = _csv(client.get(reverse("report_table_csv", args=[built.pk, "waits_by_tier"])))
    assert rows[0][:6] == [
        "Tier",
        "Jobs",
        "Never started",
        "Still waiting at the end",
        "p50 wait, all jobs (min)",
        "p90 wait, all jobs (min)",
    ]
    assert rows[1][:6] == ["Key project", "100", "0", "0", "5.0", "120.0"]
    # The started jobs' own percentiles beside every job's, each labelled with its kind.
    assert "p50 wait, started jobs only (min)" in rows[0]
    trend = _csv(client.get(reverse("report_table_csv", args=[built.pk, "waits_trend"])))
    assert trend[0][:3] == ["Month", "Tier", "Jobs"] and len(trend) > 1
    whole = _csv(client.get(reverse("report_csv", args=[built.pk])))
    sections = {row[0] for row in whole if row}
    assert {"waits_by_tier", "service", "idle", "exceptions", "findings"} <= sections
    assert client.get(reverse("report_table_csv", args=[built.pk, "nope"])).status_code == 404
    mine = _csv(
        login(lead).get(reverse("report_project_table_csv", args=[built.pk, "vision", "service"]))
    )
    assert [row[0] for row in mine[1:]] == ["Vision"]


def test_the_printable_page_has_every_table_and_print_css(ops, built):
    page = _page(ops, reverse("report_print", args=[built.pk]))
    assert "css/print.css" in page
    assert page.count('class="section print-section"') == 11  # every table, the outcomes too
    assert "site-nav" not in page


def test_ops_build_a_review_from_the_list_page(ops, world, fake_metrics):
    client = login(ops)
    response = client.post(reverse("report_list"), {"month": "2026-10"})
    assert response.status_code == 302
    bad = client.post(reverse("report_list"), {"month": "October"})
    assert bad.status_code == 400
    assert "Write the month as YYYY-MM" in bad.content.decode()
    empty = client.post(reverse("report_list"), {})
    assert empty.status_code == 400


def test_the_home_page_links_to_the_latest_review(ops, lead, built):
    page = _page(ops, reverse("home"))
    assert reverse("report_detail", args=[built.pk]) in page
    assert reverse("report_project", args=[built.pk, "vision"]) in _page(lead, reverse("home"))


def test_csv_cells_that_look_like_formulas_are_quoted(ops, world, monkeypatch):
    from reports import selectors
    from tests.reports.conftest import by_project, sample_metrics

    def evil(**kwargs):
        metrics = sample_metrics(**kwargs)
        metrics["timeline"][0]["title"] = '=HYPERLINK("http://example.com")'
        return metrics

    monkeypatch.setattr(selectors, "review_metrics_by_project", by_project(evil))
    review = services.review_build(
        review_id=services.review_request(user=ops, start=START, end=END).pk
    )
    rows = _csv(login(ops).get(reverse("report_table_csv", args=[review.pk, "timeline"])))
    assert rows[1][2] == '\'=HYPERLINK("http://example.com")'


def test_the_lead_list_links_only_the_project_views_that_open(
    lead, ops, built, fake_metrics, django_assert_num_queries, client
):
    from governance import services as governance
    from governance.models import ProjectRole
    from tests.conftest import REASON

    # The lead also leads a project the review has no numbers on: no link to its view (404).
    audio = governance.project_create(user=ops, reason=REASON, slug="audio", name="Audio")
    governance.membership_set(
        user=ops, reason=REASON, project=audio, member=lead, role=ProjectRole.LEAD
    )
    assert login(lead).get(reverse("report_project", args=[built.pk, "audio"])).status_code == 404
    page = _page(lead, reverse("report_list"))
    assert reverse("report_project", args=[built.pk, "vision"]) in page
    assert reverse("report_project", args=[built.pk, "audio"]) not in page
    # Every link of the list opens.
    links = [href.split('"')[0] for href in page.split('href="')[1:]]
    links = [href for href in links if href.startswith(reverse("report_list"))]
    assert links
    for href in links:
        assert login(lead).get(href).status_code == 200, href
    # The links of a page cost one query, however many reviews it lists.
    client.force_login(lead)
    with CaptureQueriesContext(connection) as one:
        assert client.get(reverse("report_list")).status_code == 200
    services.review_build(review_id=services.review_request(user=ops, start=START, end=END).pk)
    with django_assert_num_queries(len(one)):
        page = client.get(reverse("report_list")).content.decode()
    assert page.count("/vision/") == 2


def test_the_ops_list_costs_the_same_queries_however_many_reviews_it_lists(
    ops, built, fake_metrics, django_assert_num_queries, client
):
    client.force_login(ops)
    with CaptureQueriesContext(connection) as one:
        assert client.get(reverse("report_list")).status_code == 200
    # Two more: another month, built, and a project's review still queued.
    later = services.review_request(user=ops, start=END, end=datetime(2026, 12, 1, tzinfo=UTC))
    services.review_build(review_id=later.pk)
    queued = services.review_request(user=ops, start=START, end=END, project="vision")
    with django_assert_num_queries(len(one)):
        page = client.get(reverse("report_list")).content.decode()
    for review in (built, later, queued):
        assert f'href="{reverse("report_detail", args=[review.pk])}"' in page
