"""One limit for a rule's whole numbers on the pages and in the API, said in words."""

import pytest
from django.urls import reverse

from governance.models import RuleChange
from governance.models.limits import COUNT_MAX, DAYS_MAX
from tests.conftest import login

TOO_LARGE = 9_223_372_036_854_775_807  # what SQLite's 64-bit column would take


@pytest.mark.parametrize("value", [COUNT_MAX + 1, TOO_LARGE])
def test_the_page_and_the_api_stop_at_the_same_count(world, api_client, value):
    message = "Enter a whole number no larger than 2,147,483,647."
    quota = world.vision_a100
    page = login(world.ops).post(
        reverse("quota_edit", args=[quota.pk]),
        {
            "guarantee": quota.guarantee,
            "borrow_limit": quota.borrow_limit if quota.borrow_limit is not None else "",
            "lending_limit": quota.lending_limit if quota.lending_limit is not None else "",
            "fair_share_weight": value,
            "reclaim_grace_minutes": quota.reclaim_grace_minutes,
            "preemption_class": quota.preemption_class_id,
            "reason": "Weight",
        },
    )
    assert page.status_code == 200
    assert message in page.content.decode()
    assert 'max="2147483647"' in page.content.decode()

    api_client.force_authenticate(world.ops)
    answer = api_client.patch(
        reverse("api_quota_detail", args=[quota.pk]),
        {"reason": "Weight", "fair_share_weight": value},
        format="json",
    )
    assert answer.status_code == 400
    assert answer.json()["fields"]["fair_share_weight"] == [message]
    assert not RuleChange.objects.exists()


def test_days_have_their_own_limit(world):
    page = login(world.ops).get(reverse("tier_edit", args=[world.regular.slug]))
    assert page.status_code == 200
    assert f'max="{DAYS_MAX}"' in page.content.decode()
