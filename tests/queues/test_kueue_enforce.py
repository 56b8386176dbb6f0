"""Arbiter's Kueue enforcer, its decisions without a cluster (the lab: test_kueue_truth_enforcer):
aging's steps and cap, the tier caps' holds, the day's preemption counts, a grant's end, the
tier's rule through a governed change and the project page that shows it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from governance import services as rules
from governance.models import GrantEnd, GrantKind, PriorityTier, Terms
from governance.selectors import effective_rules
from queues.services.kueue.enforce import Context, Seen, aged, holds, plan, preemptions_today
from tests.conftest import REASON

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=timezone.get_fixed_timezone(0))


def workload(name: str, *, ns: str = "vision", tier: str = "regular", **kw: Any) -> Seen:
    values: dict[str, Any] = {
        "namespace": ns,
        "name": name,
        "uid": f"uid-{ns}-{name}",
        "created": NOW - timedelta(minutes=5),
        "tier": tier,
        "priority": 400,
        "active": True,
        "admitted_at": None,
        "cluster_queue": f"{ns}--training",
        "flavor": "a100",
        "gpus": 2,
        "preemptions": 0,
        "held": "",
        "why": "",
    }
    values.update(kw)
    return Seen(**values)


def context(org, at: datetime = NOW) -> Context:
    return Context.build(
        rules=effective_rules(at=at), pools=[org.pool], template="{project}", at=at
    )


@pytest.fixture
def ageing(org):
    exploratory = PriorityTier.objects.get(slug="exploratory")
    return rules.tier_update(
        user=org.ops,
        reason=REASON,
        tier=exploratory,
        data={"aging_after_minutes": 240, "aging_step": 10, "aging_cap": org.regular},
    )


def test_aging_takes_a_step_per_wait_in_scheduler_values_and_stops_at_its_cap(ageing):
    assert aged(ageing, base=100, waited=timedelta(minutes=239)) == (100, 0)
    assert aged(ageing, base=100, waited=timedelta(minutes=241)) == (200, 1)
    assert aged(ageing, base=100, waited=timedelta(hours=16, minutes=1)) == (400, 4)
    assert aged(ageing, base=100, waited=timedelta(days=3)) == (400, 18)


def test_a_pending_workload_is_raised_and_an_admitted_one_goes_back_to_its_tier(org, ageing):
    org.project("vision")
    ctx = context(org)
    waiting = workload("w", tier="exploratory", priority=100, created=NOW - timedelta(hours=5))
    running = workload("r", tier="exploratory", priority=200, admitted_at=NOW)
    patches = {p.key: p for p in plan(ctx, [waiting, running], {}).patches}
    assert patches["vision/w"].body["spec"] == {"priority": 200}
    assert patches["vision/w"].body["metadata"]["annotations"]["arbiter.governance/enforced"]
    assert patches["vision/r"].body["spec"] == {"priority": 100}
    # Already what the rules say: nothing to send.
    done = workload("w", tier="exploratory", priority=200, created=NOW - timedelta(hours=5))
    done = Seen(
        **{
            **done.__dict__,
            "why": patches["vision/w"].body["metadata"]["annotations"][
                "arbiter.governance/enforced"
            ],
        }
    )
    assert plan(ctx, [done], {}).patches == []


def test_a_tiers_caps_hold_past_the_total_newest_first_and_past_the_per_job_cap(org):
    rules.tier_update(
        user=org.ops,
        reason=REASON,
        tier=org.regular,
        data={"max_gpus_total": 3, "max_gpus_per_job": 3},
    )
    org.project("vision")
    org.project("nlp")
    ctx = context(org)
    first = workload("a", admitted_at=NOW - timedelta(minutes=3))
    second = workload("b", ns="nlp", admitted_at=NOW - timedelta(minutes=1))
    big = workload("c", gpus=4)
    other = workload("d", ns="elsewhere")  # not governed here: never held
    held = holds(ctx, [second, first, big, other])
    assert set(held) == {"nlp/b", "vision/c"}
    assert "2 of its 3 GPUs" in held["nlp/b"]
    assert "past its cap of 3 per job" in held["vision/c"]
    # Once the first is gone, the held one fits and is released.
    was_held = workload("b", ns="nlp", active=False, held=held["nlp/b"])
    released = plan(ctx, [was_held], {}).patches
    assert [(p.key, p.body["spec"]) for p in released] == [("nlp/b", {"active": True})]
    assert released[0].body["metadata"]["annotations"]["arbiter.governance/held"] is None


def test_the_days_preemptions_count_per_class_and_start_again_the_next_day(org):
    cautious = rules.preemption_class_create(
        user=org.ops,
        reason=REASON,
        slug="cautious",
        name="Cautious",
        kind="cautious",
        business_impact="Costly restart.",
        min_runtime_minutes=10,
        max_preemptions_per_day=2,
    )
    org.project("vision", preemption_class=cautious)
    ctx = context(org)
    old = workload("old", created=NOW - timedelta(days=2), preemptions=3, admitted_at=NOW)
    new = workload("new", preemptions=0, admitted_at=NOW - timedelta(hours=1))
    counts, state = preemptions_today({}, ctx, [old, new])
    assert counts == {"cautious": 0}  # the old one's earlier preemptions are not today's
    again = [Seen(**{**old.__dict__, "preemptions": 4}), Seen(**{**new.__dict__, "preemptions": 1})]
    counts, state = preemptions_today(state, ctx, again)
    assert counts == {"cautious": 2}
    # At the maximum: admitted cautious work runs above every tier.
    patches = {p.key: p.body for p in plan(ctx, again, counts).patches}
    assert patches["vision/new"]["spec"]["priority"] == 951
    assert (
        "2 preemptions today, its maximum 2"
        in (patches["vision/new"]["metadata"]["annotations"]["arbiter.governance/enforced"])
    )
    tomorrow = context(org, NOW + timedelta(days=1))
    counts, _state = preemptions_today(state, tomorrow, again)
    assert counts == {"cautious": 0}


def test_work_at_a_tier_its_grant_no_longer_allows_follows_the_tiers_rule(org):
    """nlp (tier Regular) ran Production work under a grant that ended: kept, lowered to
    Regular, or below every tier, as Production's rule says."""
    nlp, _quota = org.project("nlp")
    ctx = context(org)
    running = workload("g", ns="nlp", tier="production", priority=950, admitted_at=NOW)
    assert [p.body["spec"] for p in plan(ctx, [running], {}).patches if "spec" in p.body] == []
    for rule, value in ((GrantEnd.LOWER, 400), (GrantEnd.PREEMPT, 0)):
        rules.tier_update(
            user=org.ops, reason=REASON, tier=org.production, data={"after_grant": rule}
        )
        patches = plan(context(org), [running], {}).patches
        assert patches[0].body["spec"] == {"priority": value}
    # While a grant allows the tier, nothing changes.
    rules.grant_create(
        user=org.ops,
        reason=REASON,
        project=nlp,
        terms=Terms(
            kind=GrantKind.PRIORITY_UPGRADE,
            tier=org.production,
            starts_at=NOW - timedelta(hours=1),
            ends_at=NOW + timedelta(hours=1),
        ),
        now=NOW,
    )
    assert [p for p in plan(context(org), [running], {}).patches if "spec" in p.body] == []


def test_the_grant_end_rule_is_a_governed_tier_field_shown_on_the_project_page(org, client):
    """after_grant is one of the tier's editable rule fields (a change proposes it); the
    project's page says, beside a grant, what happens to its work when it ends (in Chinese
    too)."""
    from governance.services.changes.kinds import TIER

    assert "after_grant" in TIER.fields
    rules.tier_update(
        user=org.ops, reason=REASON, tier=org.production, data={"after_grant": GrantEnd.LOWER}
    )
    nlp, _quota = org.project("nlp")
    rules.grant_create(
        user=org.ops,
        reason=REASON,
        project=nlp,
        terms=Terms(
            kind=GrantKind.PRIORITY_UPGRADE,
            tier=org.production,
            starts_at=timezone.now() - timedelta(hours=1),
            ends_at=timezone.now() + timedelta(hours=1),
        ),
    )
    client.force_login(org.ops)
    page = client.get(reverse("project_detail", args=["nlp"]))
    assert "when it ends, work admitted under it is lowered to the project&#x27;s own tier" in (
        page.content.decode()
    )
    page = client.get(reverse("project_detail", args=["nlp"]), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "结束时，授权期间准入的作业降到项目自己的层级" in page.content.decode()


def test_the_cluster_page_shows_the_enforcers_last_pass_and_changes(org, client):
    from queues.models import ClusterSyncState

    state, _created = ClusterSyncState.objects.get_or_create(cluster=org.cluster)
    state.enforced_at = NOW
    state.enforcer = {
        "log": [{"at": NOW.isoformat(), "what": "nlp/job-aged: priority 100 → 200; aging"}],
        "errors": [],
    }
    state.save()
    client.force_login(org.ops)
    page = client.get(reverse("cluster_detail", args=[org.cluster.name])).content.decode()
    assert 'id="enforcer"' in page
    assert "nlp/job-aged: priority 100 → 200; aging" in page
    zh = client.get(
        reverse("cluster_detail", args=[org.cluster.name]), HTTP_ACCEPT_LANGUAGE="zh-hans"
    ).content.decode()
    assert "Arbiter 的执行器" in zh


def test_the_beat_task_passes_over_synced_kueue_clusters_every_30_seconds(org, settings):
    from governance.settings import CELERY_BEAT_SCHEDULE
    from queues import tasks

    entry = CELERY_BEAT_SCHEDULE["kueue-enforce"]
    assert entry["task"] == "queues.tasks.enforce_kueue_clusters"
    assert entry["schedule"] == timedelta(seconds=30)
    assert tasks.enforce_kueue_clusters() == {}  # org's cluster is Slurm's
    assert tasks.enforce_kueue_cluster(org.cluster.pk + 1000) is None  # gone: skipped
