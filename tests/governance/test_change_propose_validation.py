"""Every write is validated where it is proposed, whoever proposes it: values are checked
against the field's type (nothing is coerced), and a tier owner's proposal gets the same dry
run as an ops proposal, so a bad value never waits for apply to fail."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from governance import services
from governance.models import RuleChange
from governance.services import EditSpec

pytestmark = pytest.mark.django_db

BAD_WHOLE_NUMBERS = [2.7, True, "12abc", "", {}, [], "12", None, -5, 10**30]


def test_the_api_refuses_every_value_that_is_not_a_whole_number(world, api_client):
    api_client.force_authenticate(world.ops)
    for value in BAD_WHOLE_NUMBERS:
        response = api_client.post(
            reverse("api_change_propose"),
            {
                "reason": "More",
                "edits": [
                    {
                        "object_type": "quota",
                        "object": str(world.vision_a100.pk),
                        "field": "guarantee",
                        "value": value,
                    }
                ],
            },
            format="json",
        )
        assert response.status_code == 400, value
        assert "guarantee" in response.json()["fields"], (value, response.json())
    assert not RuleChange.objects.exists()


def test_a_whole_number_is_accepted_and_stored_as_given(world, api_client):
    api_client.force_authenticate(world.ops)
    response = api_client.post(
        reverse("api_change_propose"),
        {
            "reason": "More",
            "edits": [
                {
                    "object_type": "quota",
                    "object": str(world.vision_a100.pk),
                    "field": "guarantee",
                    "value": 30,
                }
            ],
        },
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["edits"][0]["new"] == 30


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("description", {"a": 1}),
        ("description", ["x"]),
        ("description", 5),
        ("name", "x" * 500),
        ("may_preempt", "yes"),
        ("may_preempt", 1),
        ("max_gpus_total", 0),
        ("max_gpus_total", -5),
        ("max_gpus_total", 10**30),
        ("max_gpus_total", "abc"),
        ("max_gpus_total", {}),
        ("score", 0),
        ("next_review_on", "soon"),
        ("owner", "nobody-by-that-name"),
    ],
)
def test_a_tier_owners_bad_proposal_is_refused_when_proposed(world, lead, api_client, field, value):
    """The business owner of a tier may propose changes to it: the same checks apply."""
    world.production.owner = lead
    world.production.save()
    api_client.force_authenticate(lead)
    response = api_client.post(
        reverse("api_change_propose"),
        {
            "reason": "Tune",
            "edits": [
                {"object_type": "tier", "object": "production", "field": field, "value": value}
            ],
        },
        format="json",
    )
    assert response.status_code == 400, response.json()
    body = response.json()["fields"]
    assert field in body or "value" in body or "edits" in body, body
    assert not RuleChange.objects.exists()


def test_a_tier_owners_proposal_that_breaks_a_tier_rule_is_refused_by_the_dry_run(world, lead):
    world.regular.owner = lead
    world.regular.save()
    # Another tier already has score 95: the dry run applies the edit and the service refuses.
    with pytest.raises(ValidationError):
        services.rule_change_create(
            user=lead,
            reason="Higher",
            edits=[EditSpec(target=world.regular, field="score", value=95)],
        )
    assert not RuleChange.objects.exists()


def test_a_tier_owners_good_proposal_is_proposed_and_the_tier_is_untouched(world, lead):
    world.regular.owner = lead
    world.regular.save()
    change = services.rule_change_create(
        user=lead,
        reason="Clearer",
        edits=[EditSpec(target=world.regular, field="description", value="Everyday work")],
    )
    assert change.status == "proposed"
    world.regular.refresh_from_db()
    assert world.regular.description == ""


def test_a_zero_fair_share_weight_gets_a_field_message(world, api_client):
    api_client.force_authenticate(world.ops)
    response = api_client.post(
        reverse("api_change_propose"),
        {
            "reason": "Less",
            "edits": [
                {
                    "object_type": "quota",
                    "object": str(world.vision_a100.pk),
                    "field": "fair_share_weight",
                    "value": 0,
                }
            ],
        },
        format="json",
    )
    assert response.status_code == 400
    messages = response.json()["fields"]["fair_share_weight"]
    assert messages == ["Ensure this value is greater than or equal to 1."]
    assert "quota_weight_positive" not in response.content.decode()


def test_the_edit_form_shows_the_zero_weight_on_the_field(world):
    from tests.conftest import login

    response = login(world.ops).post(
        reverse("quota_edit", args=[world.vision_a100.pk]),
        {
            "guarantee": 24,
            "borrow_limit": 16,
            "lending_limit": 12,
            "fair_share_weight": 0,
            "reclaim_grace_minutes": 0,
            "preemption_class": world.cautious.pk,
            "review_cycle_days": 180,
            "reason": "Less",
        },
    )
    assert response.status_code == 200
    form = response.context["form"]
    assert "fair_share_weight" in form.errors
    assert not RuleChange.objects.exists()


def test_a_hard_error_comes_before_the_observation_window_confirmation(world, ops2):
    """A guarantee above the pool inside an earlier change's observation window: the pool's
    refusal, not a request to confirm the window, since no confirmation could make it apply."""
    quota = world.vision_a100
    earlier = services.rule_change_create(
        user=world.ops,
        reason="Deadline",
        edits=[EditSpec(target=quota, field="guarantee", value=quota.guarantee + 1)],
    )
    services.rule_change_approve(change=earlier, user=ops2)
    services.rule_change_apply(change=earlier, user=ops2)
    with pytest.raises(ValidationError) as refused:
        services.rule_change_create(
            user=world.ops,
            reason="Everything",
            edits=[EditSpec(target=quota, field="guarantee", value=100_000)],
        )
    messages = " ".join(refused.value.messages)
    assert "Confirm with a reason" not in messages
    assert "confirmation_reason" not in getattr(refused.value, "error_dict", {})
    # Within the pool, the same change only needs the confirmation.
    with pytest.raises(ValidationError, match="Confirm with a reason"):
        services.rule_change_create(
            user=world.ops,
            reason="A little more",
            edits=[EditSpec(target=quota, field="guarantee", value=quota.guarantee + 2)],
        )


def test_the_observation_warning_stays_one_short_sentence_however_many_changes(world, ops2):
    """At scale a pool has hundreds of observed changes: the stored warning names the latest
    few by number and counts the rest (it once named every one, about 42 KB a change)."""
    quota = world.vision_a100
    applied = []
    for step in range(1, 8):
        change = services.rule_change_create(
            user=world.ops,
            reason=f"Step {step}",
            edits=[EditSpec(target=quota, field="fair_share_weight", value=step + 10)],
            confirmation_reason="Stepwise on purpose" if applied else "",
        )
        services.rule_change_approve(change=change, user=ops2)
        services.rule_change_apply(change=change, user=ops2)
        applied.append(change)
        quota.refresh_from_db()
    last = services.rule_change_create(
        user=world.ops,
        reason="Once more",
        edits=[EditSpec(target=quota, field="fair_share_weight", value=42)],
        confirmation_reason="Stepwise on purpose",
    )
    assert len(last.warnings) == 1
    (warning,) = last.display_warnings
    assert warning.startswith("7 changes touched the same scope")
    assert all(f"#{change.pk}" in warning for change in applied[-5:])
    assert f"#{applied[0].pk}," not in warning and len(warning) < 300
