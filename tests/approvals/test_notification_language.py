"""Notifications, timeline comments and flags are stored as a message id and its parameters,
and read in the reader's language: on pages by the page's language, in mails by the
recipient's chosen language (or the site's). Rows written before keep their stored text."""

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import translation

from approvals import services
from approvals.models import Notification, NotificationEvent
from governance import services as governance_services
from tests.approvals.conftest import HOUR, T0, quota_exception
from tests.conftest import login

pytestmark = pytest.mark.django_db


def _zh(client):
    client.cookies["django_language"] = "zh-hans"
    return client


def test_a_notification_reads_in_the_readers_language(world, policies, lead, ops):
    request = quota_exception(world, lead)
    services.request_reject(request=request, user=ops, reason="Use the inference pool", now=T0)
    told = Notification.objects.get(user=lead, event=NotificationEvent.REJECTED)

    assert told.message["key"] == "%(approver)s rejected the %(kind)s for %(project)s: %(reason)s"
    assert told.text == told.body  # English, the fallback for old readers
    with translation.override("zh-hans"):
        chinese = told.body
    assert chinese != told.text
    assert "Use the inference pool" in chinese  # what someone typed stays as typed
    assert "rejected" not in chinese

    page = _zh(login(lead)).get(reverse("notification_list")).content.decode()
    assert chinese in page
    assert "rejected the" not in page


def test_mails_go_out_in_the_recipients_language(
    world, policies, lead, ops, django_capture_on_commit_callbacks
):
    governance_services.user_language_set(user=lead, language="zh-hans")
    request = quota_exception(world, lead)
    with django_capture_on_commit_callbacks(execute=True):
        services.request_reject(request=request, user=ops, reason="Not this month", now=T0)

    sent = [message for message in mail.outbox if lead.email in message.to]
    assert len(sent) == 1
    told = Notification.objects.get(user=lead, event=NotificationEvent.REJECTED)
    with translation.override("zh-hans"):
        assert told.body in sent[0].body
        assert translation.gettext("— Arbiter") in sent[0].body
    assert "Hello" not in sent[0].body


def test_the_language_switch_remembers_a_signed_in_persons_language(lead):
    client = login(lead)
    response = client.post(reverse("set_language"), {"language": "zh-hans", "next": "/"})
    assert response.status_code == 302
    lead.refresh_from_db()
    assert lead.language == "zh-hans"
    assert lead.history.first().history_change_reason == "Chose a language"


def test_dates_in_a_message_follow_the_reader(world, policies, lead, ops):
    request = quota_exception(world, lead)
    services.request_approve(request=request, user=ops, now=T0 - HOUR)
    told = Notification.objects.get(user=lead, event=NotificationEvent.APPROVED)
    assert "when" in str(told.message)
    with translation.override("zh-hans"):
        assert "年" in told.body


def test_rows_from_before_messages_show_their_stored_text(world, policies, lead, ops):
    request = quota_exception(world, lead)
    services.request_reject(request=request, user=ops, reason="No", now=T0)
    told = Notification.objects.get(user=lead, event=NotificationEvent.REJECTED)
    Notification.objects.filter(pk=told.pk).update(message=None, text="An old text")
    told.refresh_from_db()
    with translation.override("zh-hans"):
        assert told.body == "An old text"
