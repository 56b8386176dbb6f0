"""The client's address behind a proxy: X-Forwarded-For is believed only from the proxies
the deployer trusts (ARBITER_TRUSTED_PROXIES), for the login lockout, the anonymous throttle
and the /metrics network check alike."""

import pytest
from django.test import Client, RequestFactory
from django.urls import reverse

from governance.toolkit.client import client_address
from governance.toolkit.throttles import AnonRateThrottle

pytestmark = pytest.mark.django_db
PROXY = "10.0.0.5"


def _address(meta: dict) -> str | None:
    return client_address(RequestFactory().get("/", **meta))


def test_the_forwarded_address_is_believed_from_a_trusted_proxy_only(settings):
    settings.ARBITER_TRUSTED_PROXIES = [PROXY, "10.1.0.0/16"]
    via = {"REMOTE_ADDR": PROXY}
    assert _address({**via, "HTTP_X_FORWARDED_FOR": "198.51.100.9"}) == "198.51.100.9"
    # The client's own (forged) entries left of the real hop are not believed.
    forged = "1.2.3.4, 198.51.100.9"
    assert _address({**via, "HTTP_X_FORWARDED_FOR": forged}) == "198.51.100.9"
    # Trusted hops (a second proxy) are skipped from the right.
    chain = "198.51.100.9, 10.1.2.3"
    assert _address({**via, "HTTP_X_FORWARDED_FOR": chain}) == "198.51.100.9"
    # From anyone else the header is ignored.
    direct = {"REMOTE_ADDR": "203.0.113.4", "HTTP_X_FORWARDED_FOR": "10.0.0.1"}
    assert _address(direct) == "203.0.113.4"
    assert _address({**via, "HTTP_X_FORWARDED_FOR": "garbage"}) == PROXY
    settings.ARBITER_TRUSTED_PROXIES = []
    assert _address({**via, "HTTP_X_FORWARDED_FOR": "198.51.100.9"}) == PROXY


def _login(username: str, password: str, client_ip: str):
    return Client().post(
        reverse("login"),
        {"username": username, "password": password},
        REMOTE_ADDR=PROXY,
        HTTP_X_FORWARDED_FOR=client_ip,
    )


def test_a_strangers_wrong_passwords_do_not_lock_the_real_user_out(ops, settings):
    settings.ARBITER_TRUSTED_PROXIES = [PROXY]
    for _attempt in range(settings.AXES_FAILURE_LIMIT + 3):
        _login("ops", "guess", "198.51.100.9")
    assert _login("ops", "guess", "198.51.100.9").status_code == 429  # the stranger is locked
    # The real ops, through the same proxy from their own address, signs in.
    assert _login("ops", "pw-ops", "203.0.113.4").status_code == 302


def test_the_anonymous_throttle_counts_the_resolved_address(settings):
    settings.ARBITER_TRUSTED_PROXIES = [PROXY]
    throttle = AnonRateThrottle()
    forged = RequestFactory().get("/", REMOTE_ADDR="203.0.113.4", HTTP_X_FORWARDED_FOR="1.1.1.1")
    assert throttle.get_ident(forged) == "203.0.113.4"  # a forged header buys nothing
    proxied = RequestFactory().get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.9")
    assert throttle.get_ident(proxied) == "198.51.100.9"


def test_the_metrics_network_check_uses_the_resolved_address(settings):
    settings.ARBITER_METRICS_TOKEN = ""
    settings.ARBITER_METRICS_ALLOWED_NETWORKS = ["10.9.0.0/16"]
    settings.ARBITER_TRUSTED_PROXIES = []
    forged = Client().get("/metrics", REMOTE_ADDR="203.0.113.4", HTTP_X_FORWARDED_FOR="10.9.0.1")
    assert forged.status_code == 403
    settings.ARBITER_TRUSTED_PROXIES = [PROXY]
    through = Client().get("/metrics", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="10.9.0.1")
    assert through.status_code == 200
