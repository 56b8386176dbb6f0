"""Stored reviews in the admin: ops read them; no one adds, edits or deletes one there."""

from datetime import UTC, datetime

from django.urls import reverse

from reports import services
from tests.conftest import login


def test_ops_read_reviews_in_the_admin_and_cannot_change_them(ops, member, world, fake_metrics):
    review = services.review_build(
        review_id=services.review_request(
            user=ops, start=datetime(2026, 10, 1, tzinfo=UTC), end=datetime(2026, 11, 1, tzinfo=UTC)
        ).pk
    )
    client = login(ops)
    assert client.get(reverse("admin:reports_monthlyreview_changelist")).status_code == 200
    page = client.get(reverse("admin:reports_monthlyreview_change", args=[review.pk]))
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert client.get(reverse("admin:reports_monthlyreview_add")).status_code == 403
    delete = reverse("admin:reports_monthlyreview_delete", args=[review.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403
    other = login(member).get(reverse("admin:reports_monthlyreview_changelist"))
    assert other.status_code == 302
