"""Tier rules: score range, one default, preemption only downwards, aging below preemption."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from governance import services
from governance.models import PriorityTier

pytestmark = pytest.mark.django_db


def _new_tier(world, **overrides):
    kwargs = {
        "user": world.ops,
        "reason": "New tier",
        "slug": "research",
        "name": "Research",
        "score": 55,
        "scheduler_value": 550,
        "owner": world.ops,
        "eligibility": "Research projects",
        "confirmed_by": "Research director",
        "review_cycle_days": 60,
    }
    kwargs.update(overrides)
    return services.tier_create(**kwargs)


@pytest.mark.parametrize("score", [0, 101])
def test_score_must_be_between_1_and_100(world, score):
    with pytest.raises(ValidationError) as excinfo:
        _new_tier(world, score=score)

    assert "score" in excinfo.value.message_dict
    assert not PriorityTier.objects.filter(slug="research").exists()


def test_review_cycle_must_be_positive(world):
    with pytest.raises(ValidationError) as excinfo:
        _new_tier(world, review_cycle_days=0)

    assert "review_cycle_days" in excinfo.value.message_dict


def test_next_review_follows_the_cycle(world, today):
    tier = _new_tier(world, review_cycle_days=60)

    assert (tier.next_review_on - today).days == 60


def test_making_a_tier_default_moves_the_default_with_history(world):
    tier = _new_tier(world, is_default=True)

    world.regular.refresh_from_db()
    assert tier.is_default and not world.regular.is_default
    assert world.regular.history.first().history_change_reason == "New tier"
    assert PriorityTier.objects.filter(is_default=True).count() == 1


def test_the_default_cannot_simply_be_unset(world):
    with pytest.raises(ValidationError) as excinfo:
        services.tier_update(
            tier=world.regular, user=world.ops, reason="No default", data={"is_default": False}
        )

    assert "is_default" in excinfo.value.message_dict
    world.regular.refresh_from_db()
    assert world.regular.is_default


def test_the_database_allows_only_one_default(world):
    with pytest.raises(IntegrityError), transaction.atomic():
        PriorityTier.objects.filter(pk=world.key.pk).update(is_default=True)


def test_a_tier_preempts_only_lower_tiers(world):
    with pytest.raises(ValidationError) as excinfo:
        services.tier_update(
            tier=world.key,
            user=world.ops,
            reason="Preempt up",
            data={"may_preempt": True, "preemptible_tiers": [world.production]},
        )

    message = excinfo.value.message_dict["preemptible_tiers"][0]
    assert "Production service" in message and "95" in message
    assert not world.key.preemptible_tiers.exists()


def test_naming_victims_requires_may_preempt(world):
    with pytest.raises(ValidationError) as excinfo:
        services.tier_update(
            tier=world.key,
            user=world.ops,
            reason="Victims",
            data={"preemptible_tiers": [world.exploratory]},
        )

    assert "preemptible_tiers" in excinfo.value.message_dict


def test_aging_cap_must_stay_below_every_preempting_tier(world):
    # Exploratory ages up to Regular (40). Letting Regular preempt would let aged
    # exploratory jobs preempt, so it is refused and names both tiers.
    with pytest.raises(ValidationError) as excinfo:
        services.tier_update(
            tier=world.regular,
            user=world.ops,
            reason="Regular preempts",
            data={"may_preempt": True, "preemptible_tiers": [world.exploratory]},
        )

    message = excinfo.value.message_dict["may_preempt"][0]
    assert "Exploratory" in message and "Regular" in message
    world.regular.refresh_from_db()
    assert not world.regular.may_preempt


def test_aging_may_not_reach_a_preempting_tier(world):
    with pytest.raises(ValidationError) as excinfo:
        services.tier_update(
            tier=world.exploratory,
            user=world.ops,
            reason="Age higher",
            data={"aging_cap": world.production},
        )

    assert "Production service" in excinfo.value.message_dict["aging_cap"][0]
    world.exploratory.refresh_from_db()
    assert world.exploratory.aging_cap == world.regular


def test_aging_cap_must_be_above_the_tier(world):
    with pytest.raises(ValidationError) as excinfo:
        services.tier_update(
            tier=world.key,
            user=world.ops,
            reason="Age down",
            data={"aging_after_minutes": 60, "aging_step": 5, "aging_cap": world.regular},
        )

    assert "aging_cap" in excinfo.value.message_dict


def test_aging_needs_a_step_and_a_cap(world):
    with pytest.raises(ValidationError) as excinfo:
        services.tier_update(
            tier=world.key, user=world.ops, reason="Age", data={"aging_after_minutes": 60}
        )

    assert {"aging_step", "aging_cap"} <= set(excinfo.value.message_dict)


def test_changing_preemption_targets_writes_one_history_row(world):
    before = world.production.history.count()

    services.tier_update(
        tier=world.production,
        user=world.ops,
        reason="Spare exploratory",
        data={"preemptible_tiers": [world.regular]},
    )

    assert world.production.history.count() == before + 1
    newest, previous = world.production.history.all()[:2]
    delta = newest.diff_against(previous)
    assert [change.field for change in delta.changes] == ["preemptible_tiers"]
    assert newest.history_change_reason == "Spare exploratory"
