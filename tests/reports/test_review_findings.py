"""Findings: computed from the metrics and the rules when the review is built, frozen with it,
each linked to its evidence and to the page that proposes a change."""

from datetime import UTC, datetime, timedelta

from django.urls import reverse
from django.utils import timezone

from governance import services as governance
from queues.models import AlertKind
from queues.services import alert_raise
from reports import services
from reports.selectors.findings import finding_text
from reports.selectors.stored_reviews import review_findings_shown
from tests.conftest import REASON

START = datetime(2026, 10, 1, tzinfo=UTC)
END = datetime(2026, 11, 1, tzinfo=UTC)


def _build(ops):
    return services.review_build(
        review_id=services.review_request(user=ops, start=START, end=END).pk
    )


def test_service_wait_and_exception_findings_in_words_with_links(ops, world, fake_metrics):
    review = _build(ops)
    shown = {finding["kind"]: finding for finding in review_findings_shown(review=review)}
    starved = shown["starved"]
    assert starved["text"] == (
        "Vision received 1,000 GPU-hours in training against 17,856 guaranteed, while it waited "
        "on quota for 120 hours."
    )
    assert starved["evidence_url"] == reverse("report_detail", args=[review.pk]) + "#service"
    mine = review_findings_shown(review=review, project="vision")
    assert mine[0]["evidence_url"] == "#service"
    assert starved["propose_url"] == reverse("quota_edit", args=[world.vision_a100.pk])
    hoarded = shown["hoarded"]
    assert "Speech" in hoarded["text"] and "sat idle" in hoarded["text"]
    assert hoarded["propose_url"] == reverse("quota_edit", args=[world.speech_a100.pk])
    tier = shown["tier_over_threshold"]
    assert tier["text"] == (
        "14 of 100 jobs of the tier Key project waited longer than its threshold of 60 minutes "
        "(p90 wait: 120 minutes)."
    )
    assert tier["propose_url"] == reverse("tier_edit", args=["key"])
    policy = shown["exceptions_over_policy"]
    assert "Vision asked for 5 exceptions" in policy["text"]
    assert policy["propose_url"] == reverse("approval_policy_list")


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
    assert overdue["propose_url"] == reverse("review_tier", args=["key"])
    assert overdue["evidence_url"] == reverse("tier_detail", args=["key"])
    rule = shown["rule_not_enforced"]
    assert rule["text"] == (
        "On cluster hpc, Vision: job 77 runs in a QOS the project may not use (an open alert "
        "since 2026-10-04)."
    )
    assert rule["evidence_url"] == reverse("alert_list")
    assert rule["propose_url"] == reverse("project_edit", args=["vision"])
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
