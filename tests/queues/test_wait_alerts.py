"""Wait alerts (a governed threshold per tier) and the rules-against-reality check, fed
through the ingest path (the live-Slurm versions are in test_workload_slurm.py)."""

from datetime import timedelta

import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from governance import services as rules
from governance.celery import app
from governance.models import ChangeStatus, RuleChange
from queues import services
from queues.models import Alert, AlertKind, EventKind, JobState, WorkloadJob
from queues.services.workload import JobEvent, events_ingest
from tests.conftest import REASON, login

T0 = timezone.now().replace(microsecond=0) - timedelta(hours=1)


def send(*events):
    return events_ingest(events=list(events))


def ev(job, kind, minutes, n=None, **extra):
    return JobEvent(
        source="hpc",
        event_id=f"{job}:{kind}:{n or minutes}",
        job_id=job,
        time=T0 + timedelta(minutes=minutes),
        kind=kind,
        **extra,
    )


def tier_form(tier, minutes, reason):
    return {
        "name": tier.name,
        "score": tier.score,
        "scheduler_value": tier.scheduler_value,
        "owner": tier.owner.username,  # the owner field takes a username (search as you type)
        "eligibility": tier.eligibility,
        "confirmed_by": tier.confirmed_by,
        "review_cycle_days": tier.review_cycle_days,
        "wait_alert_minutes": minutes,
        "reason": reason,
    }


def test_tiers_that_may_preempt_alert_after_ten_minutes_by_default(world):
    assert world.production.wait_alert_minutes == 10
    assert world.regular.wait_alert_minutes is None


def test_the_threshold_is_edited_as_a_governed_change(world, ops, ops2):
    tier = world.key
    response = login(ops).post(
        reverse("tier_edit", args=[tier.slug]),
        tier_form(tier, 15, "Key projects page the owner after 15 minutes"),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    change = RuleChange.objects.latest("pk")
    other = login(ops2)
    other.post(reverse("change_approve", args=[change.pk]))
    other.post(reverse("change_apply", args=[change.pk]))
    change.refresh_from_db()
    assert change.status == ChangeStatus.APPLIED
    tier.refresh_from_db()
    assert tier.wait_alert_minutes == 15
    latest = tier.history.latest()
    assert latest.wait_alert_minutes == 15 and latest.history_user == ops2  # who applied it
    assert "15 minutes" in (latest.history_change_reason or "")


@pytest.mark.parametrize("value", ["-1", "ten"])
def test_a_bad_threshold_is_a_form_error(world, ops, value):
    tier = world.key
    response = login(ops).post(
        reverse("tier_edit", args=[tier.slug]),
        tier_form(tier, value, "x"),
    )
    assert response.status_code == 200
    assert "wait_alert_minutes" in response.context["form"].errors
    tier.refresh_from_db()
    assert tier.wait_alert_minutes is None


@pytest.fixture
def eager():
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


def test_a_long_wait_raises_one_alert_updated_then_closed(
    world, ops, approver, eager, django_capture_on_commit_callbacks
):
    rules.tier_update(tier=world.production, user=ops, reason=REASON, data={"owner": approver})
    send(
        ev("1", EventKind.SUBMITTED, 0, project=world.speech, tier=world.production, gpus=8),
        ev("1", EventKind.PENDING, 1, reason="Resources"),
        # A regular-tier job waits as long: its tier has no threshold.
        ev("2", EventKind.SUBMITTED, 0, project=world.speech, tier=world.regular, gpus=1),
    )
    mail.outbox.clear()
    assert services.wait_alerts_check(now=T0 + timedelta(minutes=5)) == {"open": 0, "closed": 0}
    with django_capture_on_commit_callbacks(execute=True):
        assert services.wait_alerts_check(now=T0 + timedelta(minutes=12))["open"] == 1
    with django_capture_on_commit_callbacks(execute=True):
        services.wait_alerts_check(now=T0 + timedelta(minutes=20))
    alert = Alert.objects.get(kind=AlertKind.LONG_WAIT)
    assert alert.details["minutes"] == 20 and alert.details["category"] == "Resource shortage"
    assert {u.username for u in alert.recipients.all()} == {"approver", "ops"}
    assert sorted(m.to[0] for m in mail.outbox) == ["approver@example.com", "ops@example.com"]
    send(ev("1", EventKind.STARTED, 25))
    assert services.wait_alerts_check(now=T0 + timedelta(minutes=26))["closed"] == 1
    alert.refresh_from_db()
    assert alert.closed_at is not None and alert.details["minutes"] == 25
    assert len(mail.outbox) == 2  # one mail per person, not one per check
    # Requeued and waiting again: a new alert, not the closed one reopened.
    send(
        ev("1", EventKind.PREEMPTED, 30),
        ev("1", EventKind.REQUEUED, 30),
        ev("1", EventKind.PENDING, 31, n=31, reason="Priority"),
    )
    services.wait_alerts_check(now=T0 + timedelta(minutes=45))
    assert Alert.objects.filter(kind=AlertKind.LONG_WAIT).count() == 2


def test_closing_long_wait_alerts_reads_their_jobs_in_one_query(world):
    """Five jobs wait past the threshold, then start: their five alerts close with one read
    of the jobs table for all of them, not one per alert."""
    for n in range(5):
        send(
            ev(f"w{n}", EventKind.SUBMITTED, 0, project=world.speech, tier=world.production),
            ev(f"w{n}", EventKind.PENDING, 1, reason="Resources"),
        )
    assert services.wait_alerts_check(now=T0 + timedelta(minutes=15))["open"] == 5
    send(*(ev(f"w{n}", EventKind.STARTED, 20) for n in range(5)))
    with CaptureQueriesContext(connection) as queries:
        assert services.wait_alerts_check(now=T0 + timedelta(minutes=21)) == {
            "open": 0,
            "closed": 5,
        }
    jobs = f'FROM "{WorkloadJob._meta.db_table}"'
    # The alerts' jobs are read by key in one query, not one lookup per alert (the jobs
    # still waiting are read apart, through a cursor on PostgreSQL).
    by_key = [q["sql"] for q in queries if jobs in q["sql"] and '"key" IN (' in q["sql"]]
    one_each = [q["sql"] for q in queries if jobs in q["sql"] and '"key" = ' in q["sql"]]
    assert len(by_key) == 1 and not one_each, (by_key, one_each)
    assert not Alert.objects.filter(kind=AlertKind.LONG_WAIT, closed_at=None).exists()


@pytest.fixture
def cluster(world, ops):
    return services.cluster_create(
        user=ops, reason=REASON, name="hpc", slurm_cluster="hpc", pools=[world.training]
    )


def test_rules_against_reality(world, ops, cluster):
    common = {"cluster": cluster, "project": world.vision, "flavor": world.a100}
    send(
        # Vision may hold 40 A100 (guarantee 24 + borrow 16): 36 + 6 run.
        ev("a", EventKind.STARTED, 0, gpus=36, qos="key", **common),
        ev("b", EventKind.STARTED, 0, gpus=6, qos="training.vision.guarantee", **common),
        # Vision's top tier is Key: Production is not its QOS.
        ev("c", EventKind.STARTED, 0, gpus=0, qos="production", **common),
    )
    assert services.rules_check()["open"] == 2
    found = {a.key: a for a in Alert.objects.filter(kind=AlertKind.RULE_NOT_ENFORCED)}
    over = found[f"max:{cluster.pk}:vision:{world.a100.pk}"]
    assert (over.details["allowed"], over.details["seen"]) == (40, 42)
    assert over.cluster == cluster
    from queues.selectors import alert_text

    assert "runs more A100 80G GPUs than its maximum" in alert_text(over)[1]
    assert found[f"qos:{cluster.pk}:c"].details["seen"] == "production"
    # A never-preempt project's job preempted.
    rules.quota_update(
        quota=world.speech_a100, user=ops, reason=REASON, data={"preemption_class": world.forbidden}
    )
    speech = {"cluster": cluster, "project": world.speech, "flavor": world.a100, "gpus": 2}
    send(
        ev("s", EventKind.STARTED, 0, qos="training.speech.guarantee", **speech),
        ev("s", EventKind.PREEMPTED, 30),
    )
    services.rules_check()
    assert Alert.objects.filter(key=f"preempted:{cluster.pk}:s", closed_at=None).exists()
    # Once the overuse and the wrong QOS are gone, their alerts close.
    send(
        ev("b", EventKind.ENDED, 40, state=JobState.COMPLETED),
        ev("c", EventKind.ENDED, 40, state=JobState.COMPLETED),
    )
    assert services.rules_check()["closed"] == 2
    assert Alert.objects.filter(kind=AlertKind.RULE_NOT_ENFORCED, closed_at=None).count() == 1
    page = login(ops).get(reverse("cluster_detail", args=["hpc"])).content.decode()
    assert "was preempted" in page
