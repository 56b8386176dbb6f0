"""Grants and the effective rules: time boxes open and close at the right instants."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings
from django.utils import timezone

from governance import services
from governance.models import Grant, GrantKind, GrantState, RevisionTrigger, RulesRevision, Terms
from governance.selectors import effective_rules
from tests.conftest import with_terms

pytestmark = pytest.mark.django_db

T0 = timezone.now().replace(microsecond=0) + timedelta(days=1)


def _exception(world, **overrides):
    kwargs = {
        "user": world.ops,
        "reason": "Approved request #1",
        "kind": GrantKind.QUOTA_EXCEPTION,
        "project": world.vision,
        "pool": world.training,
        "flavor": world.a100,
        "extra_gpus": 8,
        "starts_at": T0,
        "ends_at": T0 + timedelta(days=3),
        "now": T0 - timedelta(hours=1),
        "source": "request:1",
    }
    kwargs.update(overrides)
    return services.grant_create(**with_terms(kwargs))


def _vision_quota(rules):
    return rules.projects["vision"].quotas[0]


def test_a_quota_exception_raises_the_maximum_only_inside_its_window(world):
    _exception(world)

    assert _vision_quota(effective_rules(at=T0 - timedelta(seconds=1))).maximum == 40
    assert _vision_quota(effective_rules(at=T0)).maximum == 48
    assert _vision_quota(effective_rules(at=T0 + timedelta(days=3))).maximum == 40


def test_lifting_the_borrow_limit_removes_the_maximum(world):
    _exception(world, extra_gpus=None, lift_borrow_limit=True)

    assert _vision_quota(effective_rules(at=T0)).maximum is None


def test_a_priority_upgrade_raises_the_project_tier(world):
    services.grant_create(
        user=world.ops,
        reason="Deadline",
        project=world.speech,
        terms=Terms(
            kind=GrantKind.PRIORITY_UPGRADE,
            tier=world.key,
            starts_at=T0,
            ends_at=T0 + timedelta(days=1),
        ),
    )

    assert effective_rules(at=T0 - timedelta(minutes=1)).projects["speech"].tier == world.regular
    during = effective_rules(at=T0).projects["speech"]
    assert during.tier == world.key
    assert world.key in during.allowed_tiers


def test_named_jobs_are_raised_alone(world):
    services.grant_create(
        user=world.ops,
        reason="Jump",
        project=world.speech,
        terms=Terms(
            kind=GrantKind.QUEUE_JUMP,
            tier=world.key,
            job_ids=("4711",),
            starts_at=T0,
            ends_at=T0 + timedelta(hours=4),
        ),
    )

    speech = effective_rules(at=T0).projects["speech"]
    assert speech.tier == world.regular
    assert speech.job_tiers == {"4711": world.key}


def test_protection_only_makes_the_class_stricter(world):
    services.grant_create(
        user=world.ops,
        reason="No checkpoint",
        project=world.speech,
        terms=Terms(
            kind=GrantKind.PREEMPTION_PROTECTION,
            preemption_class=world.forbidden,
            starts_at=T0,
            ends_at=T0 + timedelta(days=1),
        ),
    )

    assert _speech(effective_rules(at=T0)).preemption_class == world.forbidden
    assert _speech(effective_rules(at=T0 + timedelta(days=2))).preemption_class == world.allowed


def _speech(rules):
    return rules.projects["speech"].quotas[0]


def test_transitions_happen_once_and_record_revisions(world):
    grant = _exception(world)

    assert services.grants_transition(now=T0 - timedelta(seconds=1)) == []
    assert services.grants_transition(now=T0) == [grant]
    assert services.grants_transition(now=T0) == []
    grant.refresh_from_db()
    assert grant.state == GrantState.ACTIVE

    end = T0 + timedelta(days=3)
    assert services.grants_transition(now=end) == [grant]
    assert services.grants_transition(now=end) == []
    grant.refresh_from_db()
    assert grant.state == GrantState.EXPIRED
    triggers = list(RulesRevision.objects.order_by("pk").values_list("trigger", flat=True))
    assert triggers == [RevisionTrigger.GRANT_STARTED, RevisionTrigger.GRANT_ENDED]
    assert {row.history_user.username for row in grant.history.all()} == {"ops", "arbiter"}


def test_revoking_ends_the_grant_early(world):
    grant = _exception(world, starts_at=T0 - timedelta(hours=2), now=T0 - timedelta(hours=1))
    assert grant.state == GrantState.ACTIVE

    services.grant_revoke(grant=grant, user=world.ops, reason="Deadline moved", now=T0)

    assert _vision_quota(effective_rules(at=T0 - timedelta(minutes=1))).maximum == 48
    assert _vision_quota(effective_rules(at=T0 + timedelta(minutes=1))).maximum == 40
    with pytest.raises(ValidationError):
        services.grant_revoke(grant=grant, user=world.ops, reason="Again", now=T0)


def test_an_exception_needs_a_quota_to_raise(world):
    with pytest.raises(ValidationError) as excinfo:
        _exception(world, project=world.speech, flavor=world.h100)

    assert "pool" in excinfo.value.message_dict
    assert not Grant.objects.exists()


def test_a_grant_must_end_after_it_starts(world):
    with pytest.raises(ValidationError) as excinfo:
        _exception(world, ends_at=T0)

    assert "ends_at" in excinfo.value.message_dict


calls: list[int] = []


def record_revision(*, revision_id: int) -> None:
    calls.append(revision_id)


@override_settings(
    ARBITER_ON_RULES_CHANGED=["tests.governance.test_effective_rules.record_revision"]
)
def test_rule_change_hooks_run_after_commit(world, django_capture_on_commit_callbacks):
    calls.clear()
    with django_capture_on_commit_callbacks(execute=True):
        _exception(world, starts_at=T0 - timedelta(hours=2), now=T0 - timedelta(hours=1))

    assert calls == [RulesRevision.objects.get().pk]


def test_effective_rules_cost_a_fixed_number_of_queries(world, django_assert_num_queries):
    _exception(world)
    # tiers, projects, grants, pools, flavors, preemption classes, quotas
    with django_assert_num_queries(7):
        effective_rules(at=T0)
