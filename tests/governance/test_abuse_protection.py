"""Brute force and abuse: login lockout with back-off per username and address (django-axes),
API throttling per token and per user with 429 and Retry-After, and a Content-Security-Policy
header on every page."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from governance.selectors.people import login_cool_off

pytestmark = pytest.mark.django_db


def _login(client: Client, username: str, password: str, address: str = "10.0.0.1"):
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )


def test_wrong_passwords_lock_the_account_out_from_that_address(member, settings):
    client = Client()
    for _attempt in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _login(client, "member", "wrong").status_code == 200  # the form again
    locked = _login(client, "member", "wrong")
    assert locked.status_code == 429
    # Even the right password is refused while locked out, from that address...
    right = _login(client, "member", "pw-member")
    assert right.status_code == 429
    assert "_auth_user_id" not in client.session
    # ...but the owner can still sign in from another address.
    elsewhere = Client()
    assert _login(elsewhere, "member", "pw-member", address="10.0.0.2").status_code == 302
    assert elsewhere.session["_auth_user_id"] == str(member.pk)


def test_thirty_wrong_passwords_are_not_thirty_tries(member):
    client = Client()
    statuses = [_login(client, "member", f"guess-{n}").status_code for n in range(30)]
    assert statuses.count(429) >= 25
    assert _login(client, "member", "pw-member").status_code == 429


def test_a_right_password_resets_the_count(member, settings):
    client = Client()
    for _attempt in range(settings.AXES_FAILURE_LIMIT - 1):
        _login(client, "member", "wrong")
    assert _login(client, "member", "pw-member").status_code == 302
    assert not AccessAttempt.objects.filter(username="member").exists()


def test_the_lockout_backs_off(member, settings, rf):
    settings.ARBITER_LOGIN_COOLOFF_MINUTES = 5
    base = timedelta(minutes=5)
    request = rf.post(reverse("login"), {"username": "member", "password": "x"})
    request.axes_ip_address = "10.0.0.1"
    assert login_cool_off(request) == base
    attempt = AccessAttempt.objects.create(
        username="member",
        ip_address="10.0.0.1",
        user_agent="test",
        failures_since_start=settings.AXES_FAILURE_LIMIT,
        get_data="",
        post_data="",
        http_accept="",
        path_info="/accounts/login/",
    )
    assert login_cool_off(request) == base
    attempt.failures_since_start = settings.AXES_FAILURE_LIMIT + 3
    attempt.save()
    assert login_cool_off(request) == base * 8
    attempt.failures_since_start = 1000
    attempt.save()
    assert login_cool_off(request) == timedelta(days=1)


@pytest.fixture
def throttled(settings):
    settings.ARBITER_API_THROTTLE = True
    settings.ARBITER_API_RATES = {"token": "3/min", "user": "5/min", "anon": "2/min"}


def test_a_token_over_its_rate_gets_429_with_retry_after(throttled, ci_token, ci_user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {ci_token.key}")
    statuses = [client.get(reverse("api_tier_list")).status_code for _ in range(3)]
    assert statuses == [200, 200, 200]
    refused = client.get(reverse("api_tier_list"))
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert refused.json()["error"] == "throttled" and refused.json()["fields"] == {}


def test_a_user_over_their_rate_gets_429_whatever_the_credentials(throttled, member):
    session = APIClient()
    session.force_login(member)
    for _ in range(5):
        assert session.get(reverse("api_tier_list")).status_code == 200
    refused = session.get(reverse("api_tier_list"))
    assert refused.status_code == 429
    assert "Retry-After" in refused


def test_one_users_throttle_does_not_slow_another(throttled, member, lead):
    first, second = APIClient(), APIClient()
    first.force_login(member)
    second.force_login(lead)
    for _ in range(5):
        first.get(reverse("api_tier_list"))
    assert first.get(reverse("api_tier_list")).status_code == 429
    assert second.get(reverse("api_tier_list")).status_code == 200


def test_anonymous_clients_are_throttled_per_address(throttled):
    """The open operation (the schema); elsewhere an anonymous client gets a 401 first."""
    client = APIClient()
    statuses = [client.get(reverse("api_schema")).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert APIClient(REMOTE_ADDR="10.9.9.9").get(reverse("api_schema")).status_code == 200


@pytest.mark.parametrize(
    "url", ["/", "/projects/", "/accounts/login/", "/api/docs/", "/admin/login/"]
)
def test_every_page_carries_a_strict_csp(member, url):
    client = Client()
    client.force_login(member)
    response = client.get(url)
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    assert "object-src 'none'" in policy
    assert "frame-ancestors 'none'" in policy
