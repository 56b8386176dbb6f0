"""A change's rollback condition in a structured form (``rollback_trigger``: metric, scope,
comparison, threshold), checked where it is proposed (the change form, the API, the service)
with a clear error, kept beside the free-text note, and evaluated on the change's replay:
"would have triggered: yes/no, by how much" (issue 38, must-do 2)."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import translation

from governance import services
from governance.forms import RuleChangeMetaForm
from governance.models import RuleChange, parse_trigger
from governance.services.changes.spec import EditSpec
from queues.services import change_replay_start
from tests.conftest import login
from tests.queues.test_change_replay import NOW, _record

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("p90 wait tier training > 30 min", "p90 wait tier training > 30 min"),
        ("P90 tier training >30", "p90 wait tier training > 30 min"),
        ("p95 project vision rises by 20 %", "p95 wait project vision rises by 20 %"),
        ("p50 wait pool training rises by 12.5", "p50 wait pool training rises by 12.5 min"),
        ("preempted all >= 50", "preempted all >= 50"),
        ("lost tier exploratory <= 3", "lost tier exploratory <= 3"),
    ],
)
def test_a_trigger_reads_in_its_canonical_form(text, canonical):
    assert parse_trigger(text).text == canonical


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("p42 tier training > 3", "Unknown metric “p42”"),
        ("p90", "A scope is missing"),
        ("p90 team x > 3", "Unknown scope “team”"),
        ("p90 tier > 3", "slug is missing"),
        ("p90 tier training", "A comparison is missing"),
        ("p90 tier training == 3", "Unknown comparison “==”"),
        ("p90 tier training > soon", "The threshold must be a number"),
        ("p90 tier training > -3", "The threshold must be a number of zero or more"),
        ("p90 tier training > 3 %", "goes with “rises by” only"),
        ("preempted all > 3 min", "Minutes are the unit of waits only"),
        ("preempted pool training > 3", "A pool's scope holds waits only"),
        ("p90 tier training > 3 min please", "Unexpected “please”"),
        ("p90 tier training rises 3", "Write “rises by”"),
    ],
)
def test_a_bad_trigger_says_what_is_wrong(text, message):
    with pytest.raises(ValidationError) as caught:
        parse_trigger(text)
    assert message in " ".join(caught.value.messages)


def test_the_change_form_refuses_a_bad_trigger_on_its_field_and_keeps_a_good_one():
    form = RuleChangeMetaForm(data={"rollback_trigger": "p90 tier training above 3"})
    assert not form.is_valid()
    assert "Unknown comparison “above”" in form.errors["rollback_trigger"][0]
    form = RuleChangeMetaForm(
        data={"rollback_trigger": "p90 tier training>30", "rollback_condition": "If it hurts"}
    )
    assert form.is_valid(), form.errors
    assert form.service_data()["rollback_trigger"] == "p90 wait tier training > 30 min"
    assert form.service_data()["rollback_condition"] == "If it hurts"
    with translation.override("zh-hans"):
        form = RuleChangeMetaForm(data={"rollback_trigger": "p90 tier training above 3"})
        assert "未知比较" in form.errors["rollback_trigger"][0]


def test_the_page_and_the_api_refuse_a_trigger_naming_nothing(world, ops_client, api_client):
    tier = world.exploratory
    response = ops_client.post(
        reverse("tier_edit", args=[tier.slug]),
        {
            "name": tier.name,
            "score": tier.score,
            "scheduler_value": tier.scheduler_value,
            "owner": world.ops.username,
            "eligibility": tier.eligibility,
            "confirmed_by": tier.confirmed_by,
            "review_cycle_days": 45,
            "reason": "Review more often",
            "change-rollback_trigger": "p90 tier nowhere > 30",
        },
    )
    assert response.status_code == 200
    assert "No tier has the slug “nowhere”." in response.content.decode()
    assert not RuleChange.objects.exists()
    api_client.force_authenticate(world.ops)
    body = {
        "reason": "Review more often",
        "rollback_trigger": "p90 project nowhere > 30",
        "edits": [
            {
                "object_type": "tier",
                "object": tier.slug,
                "field": "review_cycle_days",
                "value": 45,
            }
        ],
    }
    response = api_client.post(reverse("api_change_propose"), body, format="json")
    assert response.status_code == 400
    assert "rollback_trigger" in response.json()["fields"], response.json()
    body["rollback_trigger"] = "p90 tier exploratory>30"
    response = api_client.post(reverse("api_change_propose"), body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["rollback_trigger"] == "p90 wait tier exploratory > 30 min"


def _replayed_with(world, trigger, django_capture_on_commit_callbacks):
    """Cap exploratory at 8 GPUs (its 4 jobs of 8 GPUs then wait 0, 2, 4 and 6 h; in force
    none waits), with ``trigger``, replayed."""
    _record(world)
    change = services.rule_change_create(
        user=world.ops,
        reason="Keep sweeps small",
        edits=[EditSpec(target=world.exploratory, field="max_gpus_total", value=8)],
        rollback_condition="Exploratory waits much longer.",
        rollback_trigger=trigger,
        submit=False,
    )
    with django_capture_on_commit_callbacks(execute=True):
        run, _queued = change_replay_start(change=change, user=world.ops, now=NOW)
    run.refresh_from_db()
    return change


@pytest.fixture
def eager():
    from governance.celery import app

    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


def test_the_replay_says_the_trigger_would_have_fired_and_by_how_much(
    world, eager, django_capture_on_commit_callbacks
):
    # p90 of 0, 120, 240 and 360 min is 324 min: 264 min past a 60-minute threshold.
    change = _replayed_with(
        world, "p90 wait tier exploratory > 60 min", django_capture_on_commit_callbacks
    )
    client = login(world.ops)
    html = client.get(reverse("change_replay", args=[change.pk])).content.decode()
    section = html.split('id="replay-rollback"')[1].split("</section>")[0]
    assert "Exploratory waits much longer." in section
    assert "p90 wait tier exploratory &gt; 60 min" in section
    assert 'id="rollback-verdict">yes<' in section and "4 h 24 min past the threshold" in section
    figures = client.get(reverse("api_change_replay_figures", args=[change.pk])).json()
    assert figures["rollback"] == {
        "trigger": "p90 wait tier exploratory > 60 min",
        "triggered": True,
        "in_force": 0.0,
        "with_change": 324.0,
        "compared": 324.0,
        "threshold": 60.0,
        "unit": "min",
        "margin": 264.0,
        "problem": "",
    }
    html = client.get(
        reverse("change_replay", args=[change.pk]), HTTP_ACCEPT_LANGUAGE="zh-hans"
    ).content.decode()
    assert "是否会触发" in html and "超出阈值" in html


def test_a_trigger_short_of_its_threshold_and_one_it_cannot_tell(
    world, eager, django_capture_on_commit_callbacks
):
    change = _replayed_with(
        world, "p50 tier exploratory rises by 200", django_capture_on_commit_callbacks
    )
    client = login(world.ops)
    html = client.get(reverse("change_replay", args=[change.pk])).content.decode()
    # p50: 0 → 180 min, a rise of 180: 20 min short of 200.
    assert 'id="rollback-verdict">no<' in html and "20 min short of the threshold" in html
    change.rollback_trigger = "p50 tier exploratory rises by 10 %"
    change.save(update_fields=["rollback_trigger"])
    html = client.get(reverse("change_replay", args=[change.pk])).content.decode()
    assert "cannot tell" in html and "a rise in % is undefined" in html
