"""The identity provider (OpenID Connect) for the sign-in views, the API's token check and
the page sessions: the provider's settings and discovery document, the authentication backend
(mozilla-django-oidc, made stricter: see ``governance.views.oidc``), the check that a person's
account there still exists (``provider_account_problem``), and the middleware that signs out a
page session whose account is gone.
"""

import logging
import time
from typing import Any
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib import auth
from django.core.cache import cache
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext as _
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from governance import services
from governance.models import ProviderIdentity, User
from governance.services import IdentityRefused

logger = logging.getLogger("arbiter.identity")

BACKEND = "governance.toolkit.oidc.ProviderBackend"
DISCOVERY_CACHE_SECONDS = 3600
# The settings that may come from the discovery document, and its names for them.
DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
    "OIDC_OP_END_SESSION_ENDPOINT": "end_session_endpoint",
}


def provider_setting(name: str) -> Any:
    """A setting of the flow: the deployer's value, else the provider's discovery document."""
    value = getattr(settings, name, "")
    if value or name not in DISCOVERED:
        return value
    return provider_discovery().get(DISCOVERED[name], "")


def provider_discovery() -> dict[str, Any]:
    """The issuer's ``/.well-known/openid-configuration`` (cached for an hour); its
    ``issuer`` must be the configured one."""
    issuer = settings.ARBITER_OIDC_ISSUER
    key = f"arbiter-oidc-discovery:{issuer}"
    document = cache.get(key)
    if document is None:
        try:
            response = requests.get(
                f"{issuer}/.well-known/openid-configuration",
                timeout=settings.OIDC_TIMEOUT,
                verify=settings.OIDC_VERIFY_SSL,
            )
            response.raise_for_status()
            document = response.json()
        except (requests.RequestException, ValueError) as error:
            raise IdentityRefused("unavailable", f"discovery failed: {error}") from error
        if not isinstance(document, dict) or document.get("issuer", "").rstrip("/") != issuer:
            raise IdentityRefused("issuer", f"discovery names issuer {document.get('issuer')!r}")
        cache.set(key, document, DISCOVERY_CACHE_SECONDS)
    return document


class ProviderBackend(OIDCAuthenticationBackend):
    """Verifies the provider's tokens and hands the claims to ``identity_sign_in``. Loads a
    session's person unless the provider said the account is gone or disabled."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The endpoints are read when needed (discovery), not on every session load.
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None
        self.UserModel = User

    def __getattr__(self, name: str) -> Any:
        if name in DISCOVERED:
            return provider_setting(name)
        raise AttributeError(name)

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        if attr in DISCOVERED:
            return provider_setting(attr)
        return getattr(settings, attr, *args)

    @staticmethod
    def refresh_grant(refresh_token: str) -> tuple[str, dict[str, Any] | None]:
        """``provider_redeem``: the backend's way to ask the provider (the beat's sweep
        finds it among AUTHENTICATION_BACKENDS)."""
        return provider_redeem(refresh_token)

    def authenticate(self, request: Any, **kwargs: Any) -> None:
        # Only the callback view signs people in through the provider.
        return None

    def get_user(self, user_id: Any) -> User | None:
        return (
            User.objects.filter(pk=user_id, is_active=True, is_service_account=False)
            .exclude(provider_identities__disabled_at__isnull=False)
            .first()
        )

    def verify_token(self, token: Any, **kwargs: Any) -> dict[str, Any]:
        """The ID token's signature (a key of the provider's JWKS), issuer, audience,
        authorized party, expiry and nonce; ``IdentityRefused`` names what failed."""
        nonce = kwargs.get("nonce")
        if not isinstance(token, str) or not token:
            raise IdentityRefused(
                "claim", "no id_token in the token response", {"claim": "id_token"}
            )
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as error:
            raise IdentityRefused("forged", f"unreadable ID token: {error}") from error
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise IdentityRefused("forged", f"ID token signed with {header.get('alg')!r}")
        try:
            key = self.retrieve_matching_jwk(token)
        except SuspiciousOperation as error:
            raise IdentityRefused("forged", f"no key of the JWKS matches: {error}") from error
        except (requests.RequestException, ValueError, KeyError) as error:
            raise IdentityRefused("unavailable", f"JWKS unreadable: {error}") from error
        try:
            payload: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=settings.ARBITER_OIDC_ISSUER,
                leeway=60,
                options={"require": ["iss", "aud", "exp", "iat", "sub"]},
            )
        except jwt.ExpiredSignatureError as error:
            raise IdentityRefused("expired", str(error)) from error
        except jwt.InvalidAudienceError as error:
            raise IdentityRefused("audience", str(error)) from error
        except jwt.InvalidIssuerError as error:
            raise IdentityRefused("issuer", str(error)) from error
        except jwt.MissingRequiredClaimError as error:
            raise IdentityRefused("claim", str(error), {"claim": error.claim}) from error
        except jwt.InvalidTokenError as error:
            raise IdentityRefused("forged", str(error)) from error
        audiences = payload["aud"] if isinstance(payload["aud"], list) else [payload["aud"]]
        if len(audiences) > 1 and payload.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise IdentityRefused("audience", f"azp {payload.get('azp')!r}")
        # A refreshed ID token answers no sign-in of this browser: it has no nonce to match.
        if not kwargs.get("refreshed") and (nonce is None or payload.get("nonce") != nonce):
            raise IdentityRefused("nonce", "the nonce does not match")
        return payload

    def sign_in(
        self, request: HttpRequest, *, code: str, nonce: str, code_verifier: str | None
    ) -> User:
        """Exchange ``code`` (with the PKCE verifier), verify, and sign the person in."""
        self.request = request
        payload = {
            "client_id": self.OIDC_RP_CLIENT_ID,
            "client_secret": self.OIDC_RP_CLIENT_SECRET,
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": request.build_absolute_uri(reverse("oidc_callback")),
        }
        if code_verifier:
            payload["code_verifier"] = code_verifier
        try:
            token_info = self.get_token(payload)
        except requests.HTTPError as error:
            raise IdentityRefused(
                "provider", str(error), {"error": _token_error(error.response)}
            ) from error
        except (requests.RequestException, ValueError) as error:
            raise IdentityRefused("unavailable", f"token endpoint: {error}") from error
        id_token = token_info.get("id_token")
        claims = self.verify_token(id_token, nonce=nonce)
        access_token = token_info.get("access_token")
        if self.OIDC_OP_USER_ENDPOINT and access_token:
            try:
                userinfo = self.get_userinfo(access_token, id_token, claims)
            except (requests.RequestException, ValueError, SuspiciousOperation) as error:
                raise IdentityRefused("unavailable", f"userinfo: {error}") from error
            if not isinstance(userinfo, dict) or userinfo.get("sub") != claims["sub"]:
                raise IdentityRefused("forged", "userinfo is about another subject")
            claims = {**claims, **userinfo}
        request.session["oidc_id_token"] = id_token
        return services.identity_sign_in(
            issuer=settings.ARBITER_OIDC_ISSUER,
            claims=claims,
            refresh_token=token_info.get("refresh_token") or "",
        )


def _token_error_code(response: Any) -> str:
    try:
        return str(response.json().get("error", ""))
    except (ValueError, AttributeError):
        return ""


def _token_error(response: Any) -> str:
    try:
        body = response.json()
    except (ValueError, AttributeError):
        return str(getattr(response, "status_code", ""))
    return str(body.get("error_description") or body.get("error") or response.status_code)


class ProviderSessionCheckMiddleware:
    """A page session of a person linked to the provider is checked with the provider like
    an API token (``provider_account_problem``), at most every ARBITER_OIDC_RECHECK_MINUTES,
    however it began (through the provider, or with a password): a person disabled or
    deleted there is signed out at their next page. A person with no identity there costs
    one small query per interval."""

    SESSION_KEY = "arbiter_provider_checked_at"

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if settings.ARBITER_OIDC_ENABLED and request.user.is_authenticated:
            checked = request.session.get(self.SESSION_KEY, 0)
            if time.time() - checked >= settings.ARBITER_OIDC_RECHECK_MINUTES * 60:
                if provider_account_problem(request.user, force=True):
                    auth.logout(request)
                    return HttpResponseRedirect(
                        f"{reverse(settings.LOGIN_URL)}?{urlencode({'next': request.path})}"
                    )
                request.session[self.SESSION_KEY] = time.time()
        response: HttpResponse = self.get_response(request)
        return response


def provider_account_problem(user: Any, *, force: bool = False) -> str:
    """Why ``user``'s API token (or page session) must not be accepted now because of the
    provider: empty when the person has no identity there or the provider confirmed the
    account lately (ARBITER_OIDC_RECHECK_MINUTES; ``force``: ask now); otherwise the
    provider is asked with a refresh-token grant, and a gone or disabled account is recorded
    (``identity_disable``: tokens revoked, sessions no longer loaded)."""
    if not settings.ARBITER_OIDC_ENABLED:
        return ""
    min_age = 0 if force else settings.ARBITER_OIDC_RECHECK_MINUTES * 60
    for identity in ProviderIdentity.objects.filter(
        user_id=user.pk, issuer=settings.ARBITER_OIDC_ISSUER
    ):
        if services.identity_recheck(
            identity=identity, redeem=provider_redeem, min_age_seconds=min_age
        ):
            return _("Your account at the identity provider is gone or disabled.")
    return ""


def provider_redeem(refresh_token: str) -> tuple[str, dict[str, Any] | None]:
    """A refresh-token grant at the provider: the new refresh token (or empty) and the
    verified claims of the new ID token (``None`` when it sent none or it does not verify)."""
    backend = ProviderBackend()
    payload = {
        "client_id": backend.OIDC_RP_CLIENT_ID,
        "client_secret": backend.OIDC_RP_CLIENT_SECRET,
        "grant_type": "refresh_token",
        "refresh_token": refresh_token,
    }
    try:
        token_info = backend.get_token(payload)
    except requests.HTTPError as error:
        # Only "invalid_grant" speaks of the account (RFC 6749 §5.2); "invalid_client" and
        # the like are Arbiter's own configuration and must not end anyone's access.
        detail = _token_error(error.response)
        if _token_error_code(error.response) == "invalid_grant":
            raise services.ProviderSaysNo(detail) from error
        raise services.ProviderSilent(detail) from error
    except (requests.RequestException, ValueError, IdentityRefused) as error:
        raise services.ProviderSilent(str(error)) from error
    claims = None
    if token_info.get("id_token"):
        try:
            claims = backend.verify_token(token_info["id_token"], refreshed=True)
        except IdentityRefused as refusal:
            logger.warning("A refreshed ID token was refused (%s); its claims are ignored", refusal)
    return str(token_info.get("refresh_token") or ""), claims
