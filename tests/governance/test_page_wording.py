"""Small things a person reads: "no limit" reads ∞, a status word is not shown as a reason,
yes/no filters default to "Any", no page-size choice for a list that fits one page, one
message for a negative number of GPUs, a review window's error on the month given, a lead
picks their project by name."""

import pytest
from django.urls import reverse

from approvals.forms import RequestForm
from governance import services
from governance.models import Project, Quota
from governance.selectors.changes.diff import display_value
from tests.conftest import login

pytestmark = pytest.mark.django_db


def test_no_limit_reads_infinity_in_a_plan_and_a_dash_elsewhere():
    assert display_value(Quota, "borrow_limit", None, {}) == "∞"
    assert display_value(Quota, "lending_limit", None, {}) == "∞"
    assert display_value(Quota, "borrow_limit", 8, {}) == "8"


def test_a_change_status_history_shows_no_status_word_as_a_reason(world, ops, ops2):
    change = services.rule_change_create(
        user=ops,
        reason="More for v3",
        edits=[services.EditSpec(target=world.vision_a100, field="guarantee", value=30)],
    )
    services.rule_change_approve(change=change, user=ops2)

    html = login(ops).get(reverse("change_detail", args=[change.pk])).content.decode()

    assert "Reason:</span> Approved" not in html
    assert "Reason:</span> More for v3" in html


def test_the_tier_filters_default_to_any_and_a_short_list_offers_no_page_sizes(world, ops):
    html = login(ops).get(reverse("tier_list")).content.decode()

    assert ">Any</option>" in html and ">Unknown</option>" not in html
    assert "Per page:" not in html


def test_minus_eight_extra_gpus_gets_one_message(world):
    form = RequestForm(
        data={"project": "vision", "kind": "quota_exception", "extra_gpus": "-8"},
        projects=Project.objects.all(),
    )

    assert not form.is_valid()
    assert len(form.errors["extra_gpus"]) == 1, form.errors["extra_gpus"]


def test_a_lead_picks_their_project_by_name(world, lead):
    html = login(lead).get(reverse("request_create")).content.decode()

    assert '<select name="project"' in html
    assert "A project&#x27;s slug" not in html and "A project's slug" not in html


def test_a_review_of_a_month_not_over_yet_says_so_on_the_month(ops):
    response = login(ops).post(reverse("report_list"), {"month": "2099-01"})

    assert response.status_code == 400
    form = response.context["form"]
    assert "month" in form.errors and "end" not in form.errors
