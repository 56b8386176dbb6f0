"""The Django admin: open to ops, read-only for governed rules."""

import pytest
from django.urls import reverse

from governance.models import Quota
from tests.conftest import login

pytestmark = pytest.mark.django_db


def test_ops_browse_governed_rules_and_their_history(world):
    client = login(world.ops)
    quota = world.vision_a100

    assert client.get(reverse("admin:index")).status_code == 200
    assert client.get(reverse("admin:governance_quota_changelist")).status_code == 200
    change_page = client.get(reverse("admin:governance_quota_change", args=[quota.pk]))
    assert change_page.status_code == 200
    assert b'name="_save"' not in change_page.content
    history = client.get(reverse("admin:governance_quota_history", args=[quota.pk]))
    assert history.status_code == 200
    assert b"Test set-up" in history.content


def test_governed_rules_cannot_be_changed_in_the_admin(world):
    client = login(world.ops)
    quota = world.vision_a100

    assert client.get(reverse("admin:governance_quota_add")).status_code == 403
    response = client.post(
        reverse("admin:governance_quota_change", args=[quota.pk]), {"guarantee": 60}
    )
    assert response.status_code == 403
    assert client.post(reverse("admin:governance_quota_delete", args=[quota.pk])).status_code == 403
    assert Quota.objects.get(pk=quota.pk).guarantee == 24
    assert quota.history.count() == 1


@pytest.mark.parametrize("persona", ["member", "lead", "approver"])
def test_the_admin_is_only_for_ops(world, request, persona):
    client = login(request.getfixturevalue(persona))

    response = client.get(reverse("admin:governance_quota_changelist"))

    assert response.status_code == 302
    assert reverse("admin:login") in response["Location"]
