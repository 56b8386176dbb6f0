"""Findings: computed from the metrics and the rules when the review is built, frozen with it,
each linked to its evidence and to the page that proposes a change."""

from datetime import UTC, datetime, timedelta

from django.urls import reverse
from django.utils import timezone

from governance import services as governance
from queues.models import AlertKind
from queues.services import alert_raise
from reports import selectors, services
from reports.selectors.findings import finding_text
from reports.selectors.stored_reviews import review_findings_shown
from tests.conftest import REASON
from tests.reports.conftest import by_project, sample_metrics

START = datetime(2026, 10, 1, tzinfo=UTC)
END = datetime(2026, 11, 1, tzinfo=UTC)


def path(url):
    """A proposal's page, without the finding it carries (``?reason=``)."""
    return url.split("?", 1)[0]


def _build(ops):
    return services.review_build(
        review_id=services.review_request(user=ops, start=START, end=END).pk
    )


def test_service_wait_and_exception_findings_in_words_with_links(ops, world, fake_metrics):
    review = _build(ops)
    shown = {finding["kind"]: finding for finding in review_findings_shown(review=review)}
    starved = shown["starved"]
    assert starved["text"] == (
        "Vision received 1,000 GPU-hours in training against 17,856 guaranteed: in 120 hours "
        "its jobs waited for free GPUs while it ran below its guarantee."
    )
    assert starved["evidence_url"] == reverse("report_detail", args=[review.pk]) + "#service"
    mine = review_findings_shown(review=review, project="vision")
    assert mine[0]["evidence_url"] == "#service"
    assert path(starved["propose_url"]) == reverse("quota_edit", args=[world.vision_a100.pk])
    hoarded = shown["hoarded"]
    assert "Speech" in hoarded["text"] and "sat idle" in hoarded["text"]
    assert path(hoarded["propose_url"]) == reverse("quota_edit", args=[world.speech_a100.pk])
    tier = shown["tier_over_threshold"]
    assert tier["text"] == (
        "14 of 100 jobs of the tier Key project waited longer than its threshold of 60 minutes "
        "(p90 wait: 120 minutes)."
    )
    assert path(tier["propose_url"]) == reverse("tier_edit", args=["key"])
    policy = shown["exceptions_over_policy"]
    assert "Vision asked for 5 exceptions" in policy["text"]
    assert path(policy["propose_url"]) == reverse("approval_policy_list")


def test_overdue_reviews_and_unenforced_rules_are_findings(ops, world, fake_metrics):
    today = timezone.localdate()
    governance.tier_update(
        tier=world.key,
        user=ops,
        reason=REASON,
        data={"last_reviewed_on": today - timedelta(days=200)},
    )
    alert_raise(
        kind=AlertKind.RULE_NOT_ENFORCED,
        key="qos:1:77",
        recipients=[ops],
        details={
            "cluster": "hpc",
            "project": "Vision",
            "rule": "qos_not_allowed",
            "job": "77",
            "allowed": "normal",
            "seen": "urgent",
        },
        now=START + timedelta(days=3),
    )
    review = _build(ops)
    shown = {finding["kind"]: finding for finding in review_findings_shown(review=review)}
    overdue = shown["tier_review_overdue"]
    assert overdue["text"].startswith("The review of the tier Key project was due on ")
    assert path(overdue["propose_url"]) == reverse("review_tier", args=["key"])
    assert overdue["evidence_url"] == reverse("tier_detail", args=["key"])
    rule = shown["rule_not_enforced"]
    assert rule["text"] == (
        "On cluster hpc, Vision: job 77 runs in a QOS the project may not use (an open alert "
        "since 2026-10-04)."
    )
    assert rule["evidence_url"] == reverse("alert_list")
    assert path(rule["propose_url"]) == reverse("project_edit", args=["vision"])
    # The lead's view shows their project's findings only.
    mine = review_findings_shown(review=review, project="vision")
    assert {finding["kind"] for finding in mine} == {
        "starved",
        "exceptions_over_policy",
        "rule_not_enforced",
    }


def test_findings_are_frozen_data_put_into_words_in_the_readers_language(ops, world, fake_metrics):
    from django.utils import translation

    review = _build(ops)
    starved = review.findings[0]
    assert starved["params"]["project"] == "Vision"  # data, not words
    with translation.override("zh-hans"):
        assert "Vision" in finding_text(starved) and "GPU" in finding_text(starved)
        assert finding_text(starved) != finding_text(starved).encode("ascii", "ignore").decode()


def test_a_project_that_waited_only_on_quota_is_not_starved(ops, world, monkeypatch):
    """Vision received a third of its guaranteed GPU-hours and waited on quota for 120 hours,
    but its jobs never waited for free GPUs: its own limit held them (a job larger than what
    was left of its guarantee), its guarantee was honoured, so no starved finding (the demo's
    serving projects, which ask for less than half their guarantee, were reported as starved)."""

    def held_by_its_quota(**kwargs):
        metrics = sample_metrics(**kwargs)
        for row in metrics["service"]["by_project"]:
            row["resource_wait_below_guarantee_hours"] = 0.0
        return metrics

    monkeypatch.setattr(selectors, "review_metrics", held_by_its_quota, raising=False)
    monkeypatch.setattr(
        selectors, "review_metrics_by_project", by_project(held_by_its_quota), raising=False
    )
    review = _build(ops)
    kinds = {finding["kind"] for finding in review_findings_shown(review=review)}
    assert "starved" not in kinds
    row = next(r for r in review.metrics["service"]["by_project"] if r["project"] == "vision")
    assert row["quota_wait_hours"] == 120.0 and row["gpu_hours"] == 1000.0


def _frozen_starved(**params: str) -> dict:
    base = {"project": "Vision", "pool": "training", "gpu_hours": "1,000", "guaranteed": "17,856"}
    return {"kind": "starved", "params": base | params}


def test_a_starved_finding_frozen_by_an_earlier_review_keeps_its_own_words():
    # Built before the hours below the guarantee were counted.
    assert finding_text(_frozen_starved(wait_hours="120")) == (
        "Vision received 1,000 GPU-hours in training against 17,856 guaranteed, while it waited "
        "on quota for 120 hours."
    )
    # Built when it counted the hours waiting on quota below the guarantee.
    assert finding_text(_frozen_starved(below_hours="96")) == (
        "Vision received 1,000 GPU-hours in training against 17,856 guaranteed, while it waited "
        "on quota for 96 hours in which it ran below its guarantee."
    )
    assert finding_text(_frozen_starved(starved_hours="12")) == (
        "Vision received 1,000 GPU-hours in training against 17,856 guaranteed: in 12 hours its "
        "jobs waited for free GPUs while it ran below its guarantee."
    )
