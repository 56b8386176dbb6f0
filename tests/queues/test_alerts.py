"""Alerts: one open alert per condition, mailed once per person, closed when it clears."""

import re
from datetime import timedelta

import pytest
from django.core import mail
from django.db import IntegrityError
from django.urls import reverse
from django.utils import timezone

from governance.celery import app
from queues import services
from queues.models import Alert, AlertKind, AlertRecipient, Cluster
from queues.selectors import alert_list, alert_text
from queues.tasks import alert_mail
from tests.conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager():
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


@pytest.fixture
def cluster(db) -> Cluster:
    return Cluster.objects.create(name="hpc", slurm_cluster="hpc")


def _raise(cluster, recipients, minutes=45, now=None):
    return services.alert_raise(
        kind=AlertKind.OUT_OF_SYNC,
        key=f"cluster:{cluster.pk}",
        cluster=cluster,
        recipients=recipients,
        details={"cluster": cluster.name, "minutes": minutes, "error": "timed out"},
        now=now,
    )


def test_raising_twice_updates_the_open_alert_and_mails_once(
    cluster, ops, ops2, eager, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        first = _raise(cluster, [ops, ops2], minutes=31)
    with django_capture_on_commit_callbacks(execute=True):
        second = _raise(cluster, [ops, ops2], minutes=62)

    assert first.pk == second.pk
    assert Alert.objects.count() == 1
    second.refresh_from_db()
    assert second.details["minutes"] == 62
    assert sorted(m.to[0] for m in mail.outbox) == ["ops2@example.com", "ops@example.com"]
    assert "hpc" in mail.outbox[0].subject


def test_a_new_recipient_of_an_open_alert_is_mailed_alone(
    cluster, ops, ops2, eager, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        _raise(cluster, [ops])
    with django_capture_on_commit_callbacks(execute=True):
        _raise(cluster, [ops, ops2])

    assert [m.to[0] for m in mail.outbox] == ["ops@example.com", "ops2@example.com"]


def test_the_mail_task_is_idempotent(cluster, ops):
    alert = _raise(cluster, [ops])  # on_commit never runs inside the test transaction

    assert alert_mail(alert.pk) == 1
    assert alert_mail(alert.pk) == 0
    assert len(mail.outbox) == 1
    assert AlertRecipient.objects.get(alert=alert, user=ops).mailed_at is not None


def test_closing_keeps_the_final_details_and_a_later_raise_opens_a_new_alert(cluster, ops):
    opened = timezone.now() - timedelta(hours=1)
    alert = _raise(cluster, [ops], now=opened)

    closed = services.alert_close(
        kind=AlertKind.OUT_OF_SYNC, key=f"cluster:{cluster.pk}", details={"minutes": 60}
    )

    assert closed is not None and closed.pk == alert.pk
    assert closed.closed_at >= opened and closed.details["minutes"] == 60
    assert services.alert_close(kind=AlertKind.OUT_OF_SYNC, key=f"cluster:{cluster.pk}") is None
    again = _raise(cluster, [ops])
    assert again.pk != alert.pk and again.is_open


def test_the_database_refuses_two_open_alerts_for_one_key(cluster):
    now = timezone.now()
    Alert.objects.create(kind=AlertKind.OUT_OF_SYNC, key="k", opened_at=now, updated_at=now)
    with pytest.raises(IntegrityError):
        Alert.objects.create(kind=AlertKind.OUT_OF_SYNC, key="k", opened_at=now, updated_at=now)


def test_text_renders_every_kind_with_missing_details_as_a_dash(cluster):
    now = timezone.now()
    for kind in AlertKind:
        alert = Alert(kind=kind, key="k", details={"cluster": "hpc"}, opened_at=now)
        subject, body = alert_text(alert)
        assert subject and body and "%(" not in subject + body


def test_members_see_only_their_alerts_and_ops_see_all(cluster, ops, approver, member):
    _raise(cluster, [ops])
    other = services.alert_raise(
        kind=AlertKind.LONG_WAIT,
        key="job:1",
        recipients=[approver],
        details={"job": "1", "project": "vision", "minutes": 12},
    )

    assert [a.pk for a in alert_list(user=approver)] == [other.pk]
    assert alert_list(user=member).count() == 0
    assert alert_list(user=ops).count() == 2


def test_page_lists_alerts_and_marks_them_read(cluster, ops):
    alert = _raise(cluster, [ops])
    client = login(ops)

    page = client.get(reverse("alert_list"))
    assert page.status_code == 200
    assert "hpc" in page.content.decode()
    # The "Closed" column of an open alert is empty (a dash), never the word "open".
    closed_cell = re.findall(r"<td>(.*?)</td>", page.content.decode())[-1]
    assert "open" not in closed_cell.lower().replace("still open", "") and "—" in closed_cell
    assert client.get(reverse("alert_list"), {"state": "bogus"}).status_code == 200

    assert client.post(reverse("alerts_read")).status_code == 302
    assert AlertRecipient.objects.get(alert=alert, user=ops).read_at is not None
