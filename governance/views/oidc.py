"""Sign-in through the organisation's identity provider (OpenID Connect).

mozilla-django-oidc starts the authorization-code flow: a random state, a nonce and a PKCE
verifier (S256) kept in the session, the person sent to the provider. The callback here is
stricter than the library's: the state must be one this session started (and is used once),
the ``iss`` parameter (RFC 9207) must name the configured issuer (and must be there when the
provider's discovery document says it sends it), and the ID token must be
signed with a key of the provider's JWKS, for this client (``aud``, ``azp``), by this issuer,
unexpired, with this sign-in's nonce. The userinfo answer must be about the same subject.
Every refusal renders one page that says what went wrong (in the reader's language), is
logged, and creates nothing.

The provider's endpoints come from its discovery document unless the settings name them.
"""

import time
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import auth
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from governance.models import User
from governance.services import IdentityRefused
from governance.toolkit.oidc import (
    BACKEND,
    DISCOVERED,
    ProviderBackend,
    ProviderSessionCheckMiddleware,
    logger,
    provider_discovery,
    provider_setting,
)

# The discovery document's promise to send ``iss`` with every answer (RFC 9207).
ISS_SUPPORTED = "authorization_response_iss_parameter_supported"


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
        "iss_missing": _(
            "The sign-in answer lacks the “iss” parameter that the identity provider promises "
            "to send (RFC 9207), so it may come from another provider. Start the sign-in again."
        ),
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
        if issuer is None and provider_discovery().get(ISS_SUPPORTED) is True:
            # RFC 9207 §2.4: a provider that advertises the parameter always sends it; an
            # answer without it may come from another provider (a mix-up attack).
            raise IdentityRefused("iss_missing", "no iss parameter although advertised")
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
