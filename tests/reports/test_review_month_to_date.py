"""This month so far: the review's sections from the first of the month up to the last full
hour, computed when asked, clearly marked as not frozen and never stored; its findings, like a
stored review's, propose a change whose form starts with the finding, its figures and a link
back to its evidence as the reason."""

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse
from django.utils import timezone

from governance.models import RuleChange
from queues.models import EventKind, JobState
from queues.services.workload import JobEvent, events_ingest
from queues.services.workload.rollup import workload_hours_roll_up
from reports.models import MonthlyReview
from reports.selectors.month_to_date import month_to_date_window
from tests.conftest import login

URL = "/monthly-reviews/this-month/"
SECTIONS = ("findings", "waits", "service", "lending", "idle", "preemptions", "exceptions")


def window():
    start, end = month_to_date_window(now=timezone.now())
    if end - start < timedelta(hours=2):
        pytest.skip("the month's first two hours: too little of it to count")
    return start, end


def run(name, gpus, start, end, **keys):
    common = {"source": "hpc", "job_id": name, "gpus": gpus, **keys}
    return [
        JobEvent(event_id=f"{name}:s", time=start, kind=EventKind.SUBMITTED, **common),
        JobEvent(event_id=f"{name}:r", time=start, kind=EventKind.STARTED, **common),
        JobEvent(
            event_id=f"{name}:e", time=end, kind=EventKind.ENDED, state=JobState.COMPLETED, **common
        ),
    ]


@pytest.fixture
def this_month(world):
    """Vision ran 200 GPUs in Training (96 GPUs) for the last two full hours of the window:
    over the pool's capacity."""
    start, end = window()
    keys = {"project": world.vision, "pool": world.training, "flavor": world.a100}
    assert events_ingest(events=run("big", 200, end - timedelta(hours=2), end, **keys)).stored
    workload_hours_roll_up()
    return start, end


def test_this_month_so_far_shows_the_reviews_sections_live_and_stores_nothing(ops, this_month):
    response = login(ops).get(URL)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Live, not frozen" in page and 'id="not-frozen"' in page
    for section in SECTIONS:
        assert f'id="{section}"' in page, section
    service = response.context["metrics"]["service"]["by_project"]
    assert {row["project"]: row["gpu_hours"] for row in service}["vision"] == 400.0
    assert response.context["review"].start == this_month[0]
    assert response.context["review"].end == this_month[1]
    assert "csv-link" not in page  # nothing stored to download
    assert not MonthlyReview.objects.exists()


def test_only_ops_read_this_month(member, lead, this_month):
    assert login(member).get(URL).status_code == 403
    assert login(lead).get(URL).status_code == 403


def test_a_findings_proposal_carries_the_finding_into_the_changes_reason(ops, world, this_month):
    client = login(ops)
    findings = client.get(URL).context["findings"]
    (over,) = [finding for finding in findings if finding["kind"] == "over_capacity"]
    assert over["evidence_url"] == "#idle"
    target = urlsplit(over["propose_url"])
    assert target.path == reverse("pool_capacity_edit", args=["training"])
    reason = parse_qs(target.query)["reason"][0]
    assert over["text"] in reason and "Usage above the pool's capacity" in reason
    assert "http://testserver/monthly-reviews/this-month/#idle" in reason
    # The proposal's form starts with that reason, to be edited.
    form = client.get(over["propose_url"]).context["form"]
    assert form.initial["reason"] == reason
    response = client.post(
        target.path,
        {"flavor": world.a100.pk, "gpus": 200, "reason": reason, "change-title": ""},
    )
    assert response.status_code == 302, (
        getattr(response, "context", {}) and response.context["form"].errors
    )
    change = RuleChange.objects.get()
    assert change.reason == reason
    shown = client.get(change.get_absolute_url()).content.decode()
    assert '<a href="http://testserver/monthly-reviews/this-month/#idle"' in shown


def test_a_posted_form_keeps_what_was_typed_not_the_finding(ops, world, this_month):
    client = login(ops)
    url = reverse("pool_capacity_edit", args=["training"]) + "?reason=From+a+finding"
    response = client.post(url, {"flavor": world.a100.pk, "gpus": "", "reason": "typed"})
    assert response.status_code == 200
    assert response.context["form"]["reason"].value() == "typed"


def test_this_month_reads_in_chinese_with_its_findings(ops, this_month):
    page = login(ops).get(URL, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "本月至今" in page and "实时，未冻结" in page
    assert "未冻结：这些数字会随本月进展而变化。" in page
    assert "用量超出资源池容量" in page and "证据或所声明的容量有误" in page
    assert "Computed now from the evidence" not in page
