"""Sign-in through the organisation's identity provider (OpenID Connect).

mozilla-django-oidc starts the authorization-code flow: a random state, a nonce and a PKCE
verifier (S256) kept in the session, the person sent to the provider. The callback here is
stricter than the library's: the state must be one this session started (and is used once),
the ``iss`` parameter (RFC 9207) must name the configured issuer, and the ID token must be
signed with a key of the provider's JWKS, for this client (``aud``, ``azp``), by this issuer,
unexpired, with this sign-in's nonce. The userinfo answer must be about the same subject.
Every refusal renders one page that says what went wrong (in the reader's language), is
logged, and creates nothing.

The provider's endpoints come from its discovery document unless the settings name them.
"""

import logging
import time
from typing import Any
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib import auth
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from governance import services
from governance.models import ProviderIdentity, User
from governance.services import IdentityRefused

logger = logging.getLogger("arbiter.identity")

BACKEND = "governance.views.oidc.ProviderBackend"
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


def refusal_message(refusal: IdentityRefused) -> str:
    messages = {
        "state": _(
            "This sign-in was not started here, or its link was already used. Start the "
            "sign-in again."
        ),
        "provider": _("The identity provider did not sign you in: %(error)s."),
        "forged": _(
            "The identity provider's answer could not be verified: it is not signed with the "
            "provider's published keys."
        ),
        "expired": _("The sign-in token has expired. Start the sign-in again."),
        "audience": _("The sign-in token was issued for another application."),
        "issuer": _("The sign-in comes from an identity provider that Arbiter does not trust."),
        "nonce": _(
            "The sign-in token belongs to another sign-in (its nonce does not match). Start "
            "the sign-in again."
        ),
        "claim": _("The identity provider did not send “%(claim)s”, which Arbiter needs."),
        "inactive": _("Your Arbiter account is deactivated. Ask ops if this is a mistake."),
        "unavailable": _("The identity provider could not be reached. Try again later."),
        "off": _("Signing in through an identity provider is not set up here."),
    }
    message = messages.get(refusal.code, messages["forged"])
    params = {"error": "", "claim": "", **refusal.params}
    return message % params


def refused(request: HttpRequest, refusal: IdentityRefused) -> HttpResponse:
    """The one page of a refused sign-in: what went wrong, and the way back."""
    logger.warning(
        "Sign-in through the identity provider refused from %s: %s",
        request.META.get("REMOTE_ADDR"),
        refusal,
    )
    if request.user.is_authenticated:
        auth.logout(request)
    status = 403 if refusal.code == "inactive" else 503 if refusal.code == "unavailable" else 400
    return render(
        request,
        "registration/sign_in_refused.html",
        {"message": refusal_message(refusal), "code": refusal.code},
        status=status,
    )


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


class ProviderSignInView(OIDCAuthenticationRequestView):
    """Start: state, nonce and PKCE in the session, then off to the provider."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        if attr in DISCOVERED:
            return provider_setting(attr)
        return getattr(settings, attr, *args)

    def get(self, request: HttpRequest) -> HttpResponse:  # type: ignore[override]
        if not settings.ARBITER_OIDC_ENABLED:
            return refused(request, IdentityRefused("off"))
        try:
            self.OIDC_OP_AUTH_ENDPOINT = provider_setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except IdentityRefused as refusal:
            return refused(request, refusal)
        response: HttpResponse = super().get(request)
        return response


class ProviderCallbackView(OIDCAuthenticationCallbackView):
    """The provider sends the person back here with a code (or an error)."""

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return getattr(settings, attr, *args)

    def get(self, request: HttpRequest) -> HttpResponse:  # type: ignore[override]
        if not settings.ARBITER_OIDC_ENABLED:
            return refused(request, IdentityRefused("off"))
        try:
            self.user = self._signed_in(request)
        except IdentityRefused as refusal:
            return refused(request, refusal)
        self.user.backend = BACKEND  # type: ignore[attr-defined]
        response: HttpResponse = self.login_success()
        # The provider has just confirmed the account.
        request.session[ProviderSessionCheckMiddleware.SESSION_KEY] = time.time()
        return response

    def _signed_in(self, request: HttpRequest) -> User:
        states = request.session.get("oidc_states") or {}
        state = request.GET.get("state", "")
        # Used once, whatever happens next: a replayed state finds nothing.
        entry = states.pop(state, None) if state else None
        if entry is not None:
            request.session["oidc_states"] = states
            request.session.save()
        if request.GET.get("error"):
            error = request.GET.get("error_description") or request.GET["error"]
            raise IdentityRefused("provider", f"provider error: {error}", {"error": error[:200]})
        if entry is None:
            raise IdentityRefused("state", f"unknown or used state {state[:64]!r}")
        issuer = request.GET.get("iss")
        if issuer is not None and issuer.rstrip("/") != settings.ARBITER_OIDC_ISSUER:
            raise IdentityRefused("issuer", f"iss parameter {issuer[:200]!r}")
        code = request.GET.get("code", "")
        if not code:
            raise IdentityRefused("claim", "no code in the callback", {"claim": "code"})
        return ProviderBackend().sign_in(
            request,
            code=code,
            nonce=entry.get("nonce", ""),
            code_verifier=entry.get("code_verifier"),
        )


@require_POST
def sign_out(request: HttpRequest) -> HttpResponse:
    """Sign out of Arbiter; a person who signed in through the provider is sent on to the
    provider's end-session endpoint (when it has one), which ends the provider's session too
    and comes back to the sign-in page."""
    id_token = request.session.get("oidc_id_token")
    back = request.build_absolute_uri(reverse(settings.LOGOUT_REDIRECT_URL))
    auth.logout(request)
    if id_token and settings.ARBITER_OIDC_ENABLED:
        try:
            end_session = provider_setting("OIDC_OP_END_SESSION_ENDPOINT")
        except IdentityRefused:
            end_session = ""
        if end_session:
            query = urlencode(
                {
                    "id_token_hint": id_token,
                    "post_logout_redirect_uri": back,
                    "client_id": settings.OIDC_RP_CLIENT_ID,
                }
            )
            return HttpResponseRedirect(f"{end_session}?{query}")
    return HttpResponseRedirect(back)


def sign_in_page(request: HttpRequest) -> HttpResponse:
    """Django's sign-in page, with the provider's button when it is set up; with local
    passwords off, the password form shows only at ``?break-glass``."""
    context = {
        "oidc_enabled": settings.ARBITER_OIDC_ENABLED,
        "local_login": settings.ARBITER_LOCAL_LOGIN,
        "break_glass": "break-glass" in request.GET,
    }
    view = auth_views.LoginView.as_view(extra_context=context)
    return view(request)  # type: ignore[return-value]


class ProviderSessionCheckMiddleware:
    """A page session begun through the provider is checked with the provider like an API
    token (``provider_account_problem``), at most every ARBITER_OIDC_RECHECK_MINUTES: a
    person disabled or deleted there is signed out at their next page. Sessions begun with a
    password are never touched (and cost nothing here)."""

    SESSION_KEY = "arbiter_provider_checked_at"

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if (
            settings.ARBITER_OIDC_ENABLED
            and request.session.get(auth.BACKEND_SESSION_KEY) == BACKEND
            and request.user.is_authenticated
        ):
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
        if services.identity_recheck(identity=identity, redeem=_redeem, min_age_seconds=min_age):
            return _("Your account at the identity provider is gone or disabled.")
    return ""


def _redeem(refresh_token: str) -> tuple[str, dict[str, Any] | None]:
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
