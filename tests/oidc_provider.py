"""A real OpenID Connect provider for the tests: panva's oidc-provider (OpenID Certified),
run with the machine's Node.js from deploy/oidc/provider.mjs.

Its one npm package is installed outside the work tree by deploy/oidc/install.sh (CI's
.ci/run calls it) into ``ARBITER_OIDC_CACHE`` (default /var/cache/arbiter-oidc). Locally the
tests skip when Node.js or the package is missing; under CI=true they fail.

The provider signs with an RSA key the test generates (``Provider.private_key``), so that a
test can mint a token that is expired, for another audience or from another issuer, signed
with the provider's own key; its people live in a JSON file the test rewrites (a group
change, a disabled account) and the provider reads again at every lookup.
"""

import json
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import require_service

ROOT = Path(__file__).resolve().parent.parent
CLIENT_ID = "arbiter"
CLIENT_SECRET = "arbiter-test-client-secret"
KID = "arbiter-test-key"


def default_people() -> dict[str, dict[str, Any]]:
    return {
        "wei": {
            "sub": "u-1001",
            "password": "wei-password",
            "preferred_username": "wei",
            "name": "Wei Zhang",
            "given_name": "Wei",
            "family_name": "Zhang",
            "email": "wei@example.com",
            "locale": "zh-CN",
            "groups": ["team-vision"],
        },
        "ana": {
            "sub": "u-1002",
            "password": "ana-password",
            "preferred_username": "ana",
            "name": "Ana Silva",
            "given_name": "Ana",
            "family_name": "Silva",
            "email": "ana@example.com",
            "locale": "en-GB",
            "groups": ["team-speech", "arbiter-ops"],
        },
        "gone": {
            "sub": "u-1003",
            "password": "gone-password",
            "preferred_username": "gone",
            "given_name": "Gone",
            "family_name": "Away",
            "email": "gone@example.com",
            "locale": "en",
            "groups": ["team-vision"],
            "disabled": True,
        },
    }


@dataclass
class Provider:
    issuer: str
    people_file: Path
    private_key: Any
    process: subprocess.Popen

    def people(self) -> dict[str, dict[str, Any]]:
        return json.loads(self.people_file.read_text())

    def set_person(self, username: str, **fields: Any) -> None:
        people = self.people()
        people[username].update(fields)
        self.people_file.write_text(json.dumps(people))

    def reset(self) -> None:
        self.people_file.write_text(json.dumps(default_people()))

    def mint(self, claims: dict[str, Any], *, key: Any = None, kid: str = KID) -> str:
        """An ID token signed with the provider's key (or ``key``)."""
        now = int(time.time())
        body = {"iss": self.issuer, "aud": CLIENT_ID, "iat": now, "exp": now + 300, **claims}
        return jwt.encode(body, key or self.private_key, algorithm="RS256", headers={"kid": kid})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def provider_start(folder: Path, *, redirect_base: str) -> Provider:
    node = shutil.which("node")
    modules = Path(os.environ.get("ARBITER_OIDC_CACHE", "/var/cache/arbiter-oidc")) / "node_modules"
    require_service("Node.js", node is not None, "install Node.js")
    require_service(
        "oidc-provider",
        (modules / "oidc-provider" / "package.json").is_file(),
        "run deploy/oidc/install.sh",
    )
    assert node is not None
    private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private_key))
    jwk.pop("key_ops", None)  # PyJWT writes ["sign"]: the provider also verifies with it
    jwk.update({"kid": KID, "use": "sig", "alg": "RS256"})
    keys_file = folder / "keys.json"
    keys_file.write_text(json.dumps({"keys": [jwk]}))
    people_file = folder / "people.json"
    people_file.write_text(json.dumps(default_people()))
    port = _free_port()
    issuer = f"http://127.0.0.1:{port}"
    client = {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "redirect_uris": [f"{redirect_base}/accounts/oidc/callback/"],
        "post_logout_redirect_uris": [f"{redirect_base}/accounts/login/"],
    }
    env = {
        **os.environ,
        "ARBITER_OIDC_PROVIDER_PORT": str(port),
        "ARBITER_OIDC_PROVIDER_CLIENT": json.dumps(client),
        "ARBITER_OIDC_PROVIDER_PEOPLE": str(people_file),
        "ARBITER_OIDC_PROVIDER_KEYS": str(keys_file),
        "ARBITER_OIDC_PROVIDER_MODULES": str(modules),
    }
    log = (folder / "provider.log").open("w")
    process = subprocess.Popen(
        [node, str(ROOT / "deploy" / "oidc" / "provider.mjs")],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            if requests.get(f"{issuer}/.well-known/openid-configuration", timeout=2).ok:
                break
        except requests.RequestException:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(
                f"the OpenID provider did not start: {(folder / 'provider.log').read_text()}"
            )
        time.sleep(0.2)
    return Provider(
        issuer=issuer, people_file=people_file, private_key=private_key, process=process
    )


def provider_settings(settings: Any, provider: Provider) -> None:
    """Point Arbiter at ``provider`` (as the environment would: see .env.example)."""
    from django.core.cache import cache

    from governance.settings import provider_form_action

    settings.ARBITER_OIDC_ISSUER = provider.issuer
    settings.ARBITER_OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_RP_SCOPES = "openid profile email groups"
    settings.ARBITER_OIDC_GROUPS_CLAIM = "groups"
    settings.ARBITER_OIDC_PROJECT_GROUPS = {"team-vision": ["vision"], "team-speech": ["speech"]}
    settings.ARBITER_OIDC_ROLE_GROUPS = {"arbiter-ops": ["ops"]}
    settings.AUTHENTICATION_BACKENDS = [
        *settings.AUTHENTICATION_BACKENDS,
        "governance.toolkit.oidc.ProviderBackend",
    ]
    settings.CONTENT_SECURITY_POLICY = provider_form_action(
        settings.CONTENT_SECURITY_POLICY, provider.issuer
    )
    cache.clear()


@pytest.fixture(scope="session")
def oidc_provider(live_server, tmp_path_factory):
    """The provider, once per test session (its client's redirect URI is the live server's)."""
    started = provider_start(tmp_path_factory.mktemp("oidc"), redirect_base=live_server.url)
    yield started
    started.process.terminate()
    started.process.wait(timeout=10)


@pytest.fixture
def provider(oidc_provider, settings):
    """Arbiter pointed at the provider, whose people are the defaults again."""
    oidc_provider.reset()
    provider_settings(settings, oidc_provider)
    return oidc_provider


def provider_browse(
    provider: Provider,
    base_url: str,
    username: str,
    password: str,
    *,
    callback: Any = None,
) -> requests.Response:
    """A sign-in as a browser makes it, without one: Arbiter's start page (live server), the
    provider's login form, then back to Arbiter's callback. ``callback(params)`` may change
    the callback's query parameters (code, state, iss) before the browser follows it. Returns
    Arbiter's answer to the callback (not followed); the session is ``.session``."""
    from urllib.parse import parse_qsl, urlencode, urlsplit

    browser = requests.Session()
    answer = browser.get(f"{base_url}/accounts/oidc/start/", allow_redirects=False, timeout=10)
    location = answer.headers["Location"]
    for _hop in range(10):
        if location.startswith(f"{base_url}/accounts/oidc/callback/"):
            break
        if location.startswith("/"):
            location = provider.issuer + location
        if "/interaction/" in location and not location.endswith("/login"):
            page = browser.get(location, allow_redirects=False, timeout=10)
            if page.status_code == 200:  # the login form
                page = browser.post(
                    f"{location}/login",
                    data={"username": username, "password": password},
                    allow_redirects=False,
                    timeout=10,
                )
            assert page.status_code in (302, 303), page.text
            location = page.headers["Location"]
            continue
        page = browser.get(location, allow_redirects=False, timeout=10)
        assert page.status_code in (302, 303), page.text
        location = page.headers["Location"]
    else:
        raise AssertionError(f"the provider never sent the browser back: {location}")
    params = dict(parse_qsl(urlsplit(location).query))
    if callback is not None:
        params = callback(params)
    answer = browser.get(
        f"{base_url}/accounts/oidc/callback/?{urlencode(params)}",
        allow_redirects=False,
        timeout=10,
    )
    answer.session = browser  # type: ignore[attr-defined]
    return answer
