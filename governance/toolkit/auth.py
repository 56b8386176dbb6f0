"""API authentication by token, scope enforcement, and the audit of token writes.

- ``ApiTokenAuthentication``: ``Authorization: Bearer <token>`` (or ``Token <token>``); a bad,
  expired or revoked token, or one of an inactive account, is a 401 with a
  ``WWW-Authenticate`` challenge. A view may read the token in the same query as its own
  data (its ``token_finder(request)``: placement's hot path); the checks stay the same.
- ``TokenScopePermission`` (in ``DEFAULT_PERMISSION_CLASSES``): a token-authenticated request
  needs the view's ``required_scope`` (default: ``read`` for safe methods, ``request`` for the
  rest). A signed-in browser session is not limited by scopes.
- ``ApiWriteAuditMiddleware``: every write made with a token is recorded with its account,
  token, outcome and the optional ``X-Pipeline-Run-URL``.
- ``PeopleOnlyBackend``: service accounts never sign in to the pages (nor keep a session),
  nor does a person the identity provider disabled.
"""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission

from governance import selectors, services
from governance.models import ApiToken, User

from .client import client_address

KEYWORDS = (b"bearer", b"token")
CHALLENGE = 'Bearer realm="api"'
PIPELINE_RUN_HEADER = "HTTP_X_PIPELINE_RUN_URL"


def scope_problem(token: ApiToken, view: Any, method: str) -> str:
    """Why ``token`` may not call ``method`` on ``view`` (its scope), or "" when it may."""
    scope = selectors.required_scope(view, method)
    if token.has_scope(scope):
        return ""
    return _("This token lacks the “%(scope)s” scope that this operation needs.") % {"scope": scope}


class ApiTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Any) -> tuple[Any, ApiToken] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in KEYWORDS:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(
                _("Invalid Authorization header: give one token after the keyword.")
            )
        try:
            key = parts[1].decode("ascii")
        except UnicodeError as error:
            raise exceptions.AuthenticationFailed(_("Invalid token.")) from error
        view = (getattr(request, "parser_context", None) or {}).get("view")
        # A view's hot path may read the token in the same query as its own data: its
        # ``token_finder(request)`` gives how to read a token by its prefix (or None).
        finder = getattr(view, "token_finder", None)
        find = finder(request) if finder is not None else None
        token, problem = selectors.api_token_authenticate(key=key, find=find)
        if token is None:
            raise exceptions.AuthenticationFailed(problem)
        # A person linked to the identity provider: is the account still there? Whatever
        # their password: a leaver who set one keeps no token past the provider's "no".
        # (The provider is asked at most every ARBITER_OIDC_RECHECK_MINUTES; toolkit.oidc.)
        if settings.ARBITER_OIDC_ENABLED and not token.user.is_service_account:
            from .oidc import provider_account_problem

            problem = provider_account_problem(token.user)
            if problem:
                raise exceptions.AuthenticationFailed(problem)
        address = client_address(request)
        services.api_token_touch(token=token, address=address)
        # For the audit middleware, which sees the Django request, not DRF's.
        request._request.arbiter_api_token = token
        # The scope is checked here too, so that a view which replaces the default permission
        # classes still cannot be called beyond a token's scopes.
        if view is not None:
            problem = scope_problem(token, view, request.method or "GET")
            if problem:
                raise exceptions.PermissionDenied(problem)
        return token.user, token

    def authenticate_header(self, request: Any) -> str:
        return CHALLENGE


class ApiTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """The token in the OpenAPI schema: an HTTP bearer scheme."""

    target_class = "governance.toolkit.auth.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": str(
                _(
                    "An API token (arb_…): 'Authorization: Bearer <token>' ('Token <token>' "
                    "works too). A token acts within its scopes: read, request, ingest, sync."
                )
            ),
        }


class TokenScopePermission(BasePermission):
    """Contract A: a token acts only within its scopes."""

    message = _("This token does not have the scope this operation needs.")

    def has_permission(self, request: Any, view: Any) -> bool:
        token = request.auth
        if not isinstance(token, ApiToken):
            return True
        problem = scope_problem(token, view, request.method or "GET")
        if problem:
            self.message = problem
            return False
        return True


class ApiWriteAuditMiddleware:
    """After a write made with a token: one ``ApiWrite`` row (account, token, outcome, run)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        token = getattr(request, "arbiter_api_token", None)
        if token is not None and request.method not in selectors.SAFE_METHODS:
            services.api_write_record(
                token=token,
                method=request.method or "",
                path=request.path,
                status_code=response.status_code,
                pipeline_run_url=request.META.get(PIPELINE_RUN_HEADER, ""),
                address=client_address(request),
            )
        return response


class PeopleOnlyBackend(ModelBackend):
    """The model backend for people only: a service account's user can neither sign in nor
    be loaded from a session, nor can a person the identity provider disabled (whatever
    their password)."""

    def user_can_authenticate(self, user: Any) -> bool:
        if (
            user.pk is not None
            and user.provider_identities.filter(disabled_at__isnull=False).exists()
        ):
            return False
        return self._may_sign_in(user)

    def _may_sign_in(self, user: Any) -> bool:
        if getattr(user, "is_service_account", False):
            return False
        # Local passwords switched off: only the documented break-glass accounts.
        if not settings.ARBITER_LOCAL_LOGIN and not selectors.is_break_glass(user):
            return False
        return super().user_can_authenticate(user)

    def get_user(self, user_id: Any) -> Any:
        # One query, as Django's: the provider's "disabled" read with the person.
        user = (
            User.objects.filter(pk=user_id)
            .exclude(provider_identities__disabled_at__isnull=False)
            .first()
        )
        return user if user is not None and self._may_sign_in(user) else None
