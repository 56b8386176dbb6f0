"""Passwords from a link by mail: an account made in the admin gets an invitation when it is
activated, links are rate-limited per address and per account, and setting a password revokes
the person's tokens (the mail and the page say so)."""

import re

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from governance import services
from governance.models import User
from governance.services import EditSpec
from tests.conftest import REASON

pytestmark = pytest.mark.django_db
LINK = re.compile(r"https?://[^\s]+/accounts/reset/[^\s]+/")


def _ask(email: str, address: str = "198.51.100.9"):
    return Client().post(reverse("password_reset"), {"email": email}, REMOTE_ADDR=address)


def test_an_account_made_in_the_admin_is_invited_to_set_its_password(
    ops, ops2, django_capture_on_commit_callbacks
):
    newcomer = services.user_create(
        user=ops, reason=REASON, username="newcomer", email="new@example.com"
    )
    assert not newcomer.has_usable_password()
    change = services.rule_change_create(
        user=ops, reason="Joins", edits=[EditSpec(target=newcomer, field="is_active", value=True)]
    )
    services.rule_change_approve(change=change, user=ops2)
    with django_capture_on_commit_callbacks(execute=True):
        services.rule_change_apply(change=change, user=ops2)
    (invitation,) = mail.outbox
    assert invitation.to == ["new@example.com"]
    link = LINK.search(invitation.body).group(0)
    client = Client()
    form = client.get(link, follow=True)
    assert form.status_code == 200
    done = client.post(
        form.redirect_chain[-1][0],
        {"new_password1": "a-long-new-secret-77", "new_password2": "a-long-new-secret-77"},
        follow=True,
    )
    assert done.status_code == 200 and "Your password is set." in done.content.decode()
    newcomer.refresh_from_db()
    assert newcomer.check_password("a-long-new-secret-77")
    # An active person with no password yet may also ask for a link themselves.
    mail.outbox.clear()
    newcomer.set_unusable_password()
    newcomer.save()
    _ask("new@example.com")
    assert len(mail.outbox) == 1


def test_setting_a_password_from_a_link_revokes_the_persons_tokens(member):
    member.email = "member@example.com"
    member.save()
    token = services.personal_token_create(user=member, name="laptop", scopes=["read"])
    assert _ask("member@example.com").status_code == 302
    (message,) = mail.outbox
    assert "revokes every API token" in message.body
    client = Client()
    form = client.get(LINK.search(message.body).group(0), follow=True)
    done = client.post(
        form.redirect_chain[-1][0],
        {"new_password1": "a-long-new-secret-77", "new_password2": "a-long-new-secret-77"},
        follow=True,
    )
    assert "1 API token was revoked" in done.content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token.key}")
    assert api.get(reverse("api_project_list")).status_code == 401


def test_links_are_rate_limited_per_address_and_per_account(member, settings):
    settings.ARBITER_PASSWORD_LINK_RATE_ADDRESS = "4/hour"
    settings.ARBITER_PASSWORD_LINK_RATE_ACCOUNT = "2/hour"
    User.objects.filter(pk=member.pk).update(email="member@example.com")
    # Per account: ten asks from ten addresses send two mails; every answer looks the same.
    statuses = {_ask("member@example.com", f"198.51.100.{n}").status_code for n in range(10)}
    assert statuses == {302} and len(mail.outbox) == 2
    # Per address: the fifth ask from one address is refused, whatever the account.
    for n in range(4):
        assert _ask(f"nobody{n}@example.com", "203.0.113.4").status_code == 302
    refused = _ask("nobody9@example.com", "203.0.113.4")
    assert refused.status_code == 429 and "Too many" in refused.content.decode()


def _arbiter_page(response, marker: str) -> str:
    """The page is Arbiter's own (base.html, its marker), never Django admin's."""
    names = [template.name for template in response.templates]
    assert "base.html" in names, names
    assert not any(name and name.startswith("admin/") for name in names), names
    html = response.content.decode()
    assert f'id="{marker}"' in html
    return html


@pytest.mark.parametrize(
    ("language", "subject", "sent", "set_done"),
    [
        ("en", "Arbiter: set your password", "Check your mail", "Password set"),
        ("zh-hans", "Arbiter：设置您的密码", "请查收邮件", "密码已设置"),
    ],
)
def test_every_page_of_the_password_flow_is_arbiters_in_both_languages(
    member, language, subject, sent, set_done
):
    member.email = "member@example.com"
    member.language = language
    member.save()
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    _arbiter_page(client.get(reverse("password_reset")), "password-link-form")
    asked = client.post(reverse("password_reset"), {"email": "member@example.com"}, follow=True)
    assert sent in _arbiter_page(asked, "password-link-sent")
    (message,) = mail.outbox
    assert message.subject == subject
    form = client.get(LINK.search(message.body).group(0), follow=True)
    _arbiter_page(form, "password-set")
    done = client.post(
        form.redirect_chain[-1][0],
        {"new_password1": "a-long-new-secret-77", "new_password2": "a-long-new-secret-77"},
        follow=True,
    )
    assert set_done in _arbiter_page(done, "password-set-done")
    member.refresh_from_db()
    client.force_login(member)
    _arbiter_page(client.get(reverse("password_change")), "password-change")
    changed = client.post(
        reverse("password_change"),
        {
            "old_password": "a-long-new-secret-77",
            "new_password1": "another-long-secret-78",
            "new_password2": "another-long-secret-78",
        },
        follow=True,
    )
    _arbiter_page(changed, "password-changed")
    # A used link says so on Arbiter's page.
    again = Client(HTTP_ACCEPT_LANGUAGE=language).get(LINK.search(message.body).group(0))
    _arbiter_page(again, "password-link-refused")


def test_no_links_while_local_login_is_off_but_for_break_glass_accounts(settings, member, ops):
    settings.ARBITER_LOCAL_LOGIN = False
    settings.ARBITER_BREAK_GLASS_USERS = ["ops"]
    assert _ask(member.email).status_code == 302  # the same answer as for any address
    assert mail.outbox == []
    member.set_unusable_password()
    member.save()
    assert not services.user_invitation_send(person_id=member.pk)
    assert mail.outbox == []
    assert _ask(ops.email).status_code == 302
    (message,) = mail.outbox
    assert message.to == [ops.email]
    # A link sent while passwords were on stops working when they are switched off.
    settings.ARBITER_BREAK_GLASS_USERS = []
    page = Client().get(LINK.search(message.body).group(0), follow=True)
    assert "switched off here (ARBITER_LOCAL_LOGIN)" in _arbiter_page(page, "password-link-refused")
