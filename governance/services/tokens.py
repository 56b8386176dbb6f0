"""Service accounts and API tokens.

A token is ``arb_<prefix>_<secret>``: the secret has 256 bits of entropy, only its SHA-256
digest is stored, and the services return it once (``token.key``, never saved). Who may do
what (``governance.selectors.tokens``): a project's lead (for their project) and ops manage
service accounts and their tokens; a person manages their own personal tokens, nobody else's;
a service account manages nothing.
"""

import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from governance.models import (
    ApiToken,
    ApiTokenUsage,
    ApiWrite,
    Membership,
    Project,
    ProjectRole,
    ServiceAccount,
    SiteRole,
    TokenScope,
    User,
)
from governance.selectors.tokens import (
    TOKEN_START,
    service_account_people,
    token_digest,
    user_may_manage_personal_tokens,
    user_may_manage_service_accounts,
)

from ._history import governed_save, require_reason


def _managers_only() -> str:
    return _("Only ops, or the project's lead, may manage its service accounts.")


# The last-used time and address are written at most once per this interval per token.
USAGE_INTERVAL = timedelta(minutes=1)


def _clean_scopes(scopes: Iterable[str], within: Iterable[str] | None) -> list[str]:
    values = [str(scope) for scope in scopes]
    wanted = [scope for scope in TokenScope.values if scope in values]
    if not values or set(values) - set(TokenScope.values):
        raise ValidationError({"scopes": _("Choose one or more of: read, request, ingest, sync.")})
    if within is not None:
        beyond = sorted(set(wanted) - set(within))
        if beyond:
            raise ValidationError(
                {
                    "scopes": _(
                        "A token cannot make a token with more scopes than its own (%(scopes)s)."
                    )
                    % {"scopes": ", ".join(beyond)}
                }
            )
    return wanted


def _expiry_days(days: int | None) -> int:
    maximum = settings.ARBITER_TOKEN_MAX_DAYS
    if days is None:
        return min(settings.ARBITER_TOKEN_DEFAULT_DAYS, maximum)
    if days < 1 or days > maximum:
        raise ValidationError(
            {"expires_in_days": _("Choose between 1 and %(max)d days.") % {"max": maximum}}
        )
    return days


def _expiry(days: int | None, now: datetime, parent: ApiToken | None) -> datetime:
    """When a new token expires: never after the token that mints it (asked for later, it is
    refused; by default it ends with its parent)."""
    expires_at = now + timedelta(days=_expiry_days(days))
    if parent is None or expires_at <= parent.expires_at:
        return expires_at
    if days is None:
        return parent.expires_at
    raise ValidationError(
        {
            "expires_in_days": _(
                "A token cannot make a token that outlives it: this one expires on %(end)s."
            )
            % {"end": parent.expires_at.strftime("%Y-%m-%d %H:%M UTC")}
        }
    )


def _needs_approval(owner: User, scopes: list[str]) -> bool:
    """A service account's token that may file changes and requests (``request``) is a
    governed change: a second person approves it before it works."""
    return owner.is_service_account and TokenScope.REQUEST in scopes


def _parent_locked(parent: ApiToken) -> ApiToken:
    """The token a new one is minted with, locked for the rest of the transaction and read
    again: a revoke holds the same lock while it walks the children, so a child is either
    made before the revoke (and found by it) or refused after it, never left live."""
    locked = ApiToken.objects.select_for_update().get(pk=parent.pk)
    if locked.revoked_at is not None:
        raise ValidationError(
            _(
                "The token this request came with was revoked meanwhile: a revoked token "
                "mints no token."
            )
        )
    if locked.expires_at <= timezone.now():
        raise ValidationError(_("The token this request came with has expired: it mints no token."))
    return locked


def _token_make(
    *,
    owner: User,
    name: str,
    scopes: Iterable[str],
    days: int | None,
    user: User,
    reason: str,
    parent: ApiToken | None,
) -> ApiToken:
    if not owner.is_active and not _pending_account(owner):
        raise ValidationError(_("The account is inactive: it cannot get a token."))
    if parent is not None:
        parent = _parent_locked(parent)
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": _("Give the token a name (what uses it).")})
    now = timezone.now()
    prefix = secrets.token_hex(4)
    key = f"{TOKEN_START}{prefix}_{secrets.token_urlsafe(32)}"
    clean_scopes = _clean_scopes(scopes, None if parent is None else parent.scopes)
    token = ApiToken(
        user=owner,
        name=name,
        prefix=prefix,
        digest=token_digest(key),
        scopes=clean_scopes,
        created_by=user,
        created_at=now,
        expires_at=_expiry(days, now, parent),
        parent=parent,
        approved_at=None if _needs_approval(owner, clean_scopes) else now,
    )
    governed_save(token, user=user, reason=reason)
    token.key = key  # shown once, never stored
    return token


@transaction.atomic
def personal_token_create(
    *,
    user: User,
    name: str,
    scopes: Iterable[str],
    expires_in_days: int | None = None,
    parent: ApiToken | None = None,
) -> ApiToken:
    """A token that acts as ``user`` (within ``scopes``); only they can make it.

    ``parent``: the token this request came with, if any (a token never makes a token that
    may do more or live longer than itself, and revoking it revokes what it made)."""
    if not user_may_manage_personal_tokens(user):
        raise PermissionDenied(_("Only a person makes personal tokens, for themselves."))
    return _token_make(
        owner=user,
        name=name,
        scopes=scopes,
        days=expires_in_days,
        user=user,
        reason=_("Personal token made by its owner"),
        parent=parent,
    )


@transaction.atomic
def service_account_create(
    *,
    project: Project | None,
    username: str,
    description: str = "",
    user: User,
    reason: str,
) -> ServiceAccount:
    """A service account of ``project`` (a member of it) or, with no project, a site-wide one
    for ops tools (it acts as ops, within its tokens' scopes, but never decides anything)."""
    reason = require_reason(reason)
    if not user_may_manage_service_accounts(user=user, project=project):
        raise PermissionDenied(
            _managers_only()
            if project is not None
            else _("Only ops may make a site-wide service account.")
        )
    username = (username or "").strip()
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationError({"username": _("This name is taken.")})
    account_user = User(
        username=username,
        first_name="",
        is_service_account=True,
        site_role=SiteRole.MEMBER if project is not None else SiteRole.OPS,
        # A site-wide account acts as ops: it works once a second person approved it.
        is_active=project is not None,
    )
    account_user.set_unusable_password()
    try:
        governed_save(account_user, user=user, reason=reason)
    except ValidationError as error:
        raise ValidationError(
            {"username": error.message_dict.get("username", error.messages)}
        ) from error
    account = ServiceAccount(
        user=account_user,
        project=project,
        description=description.strip(),
        created_by=user,
        approved_at=timezone.now() if project is not None else None,
    )
    governed_save(account, user=user, reason=reason)
    if project is not None:
        membership = Membership(project=project, user=account_user, role=ProjectRole.MEMBER)
        governed_save(membership, user=user, reason=reason)
    return account


def _pending_account(owner: User) -> bool:
    """Whether ``owner`` is a site-wide service account still waiting for its approval."""
    return bool(
        owner.is_service_account
        and ServiceAccount.objects.filter(
            user=owner, approved_at=None, deactivated_at=None
        ).exists()
    )


def _second_person_problem(*, account: ServiceAccount, user: User) -> str | None:
    """Why ``user`` may not approve what makes ``account`` act (its existence, a token's
    ``request`` scope): only ops who are not behind the account (four eyes)."""
    if not (user.is_active and not user.is_service_account and user.is_ops):
        return _("Only ops may approve a service account or its token.")
    if user.pk in service_account_people(account):
        return _(
            "Four eyes: you made, manage or minted a token for the service account "
            "“%(account)s”: someone else must approve it."
        ) % {"account": account.user.username}
    return None


@transaction.atomic
def service_account_approve(*, account: ServiceAccount, user: User, reason: str = "") -> None:
    """A second person lets a site-wide account work (it acts as ops)."""
    account = ServiceAccount.objects.select_for_update().select_related("user").get(pk=account.pk)
    problem = _second_person_problem(account=account, user=user)
    if problem is not None:
        raise PermissionDenied(problem)
    if account.deactivated_at is not None:
        raise ValidationError(_("This service account is deactivated."))
    if account.approved_at is not None:
        raise ValidationError(_("This service account is already approved."))
    reason = (reason or "").strip() or _("Site-wide service account approved")
    account.approved_at = timezone.now()
    account.approved_by = user
    governed_save(account, user=user, reason=reason)
    account.user.is_active = True
    governed_save(account.user, user=user, reason=reason)


@transaction.atomic
def api_token_approve(*, token: ApiToken, user: User, reason: str = "") -> ApiToken:
    """A second person lets a service account's ``request``-scoped token work."""
    token = ApiToken.objects.select_for_update().select_related("user").get(pk=token.pk)
    account = ServiceAccount.objects.filter(user=token.user).first()
    if account is None:
        raise ValidationError(_("A personal token needs no approval."))
    problem = _second_person_problem(account=account, user=user)
    if problem is not None:
        raise PermissionDenied(problem)
    if token.revoked_at is not None:
        raise ValidationError(_("This token is revoked."))
    if token.approved_at is not None:
        raise ValidationError(_("This token is already approved."))
    token.approved_at = timezone.now()
    token.approved_by = user
    governed_save(token, user=user, reason=(reason or "").strip() or _("Token approved"))
    return token


def _revoke_with_children(token: ApiToken, *, user: User, reason: str, now: datetime) -> int:
    """Revoke ``token`` (locked, live) and every live token it minted, down the line."""
    count = 0
    pending = [token]
    while pending:
        current = pending.pop()
        current.revoked_at = now
        current.revoked_by = user
        governed_save(current, user=user, reason=reason)
        count += 1
        pending.extend(ApiToken.objects.select_for_update().filter(parent=current, revoked_at=None))
    return count


@transaction.atomic
def user_tokens_revoke(*, owner: User, user: User, reason: str) -> int:
    """Revoke every live token ``owner`` holds (a password reset, a deactivation, a role
    removal): how many were revoked."""
    now = timezone.now()
    count = 0
    for token in ApiToken.objects.select_for_update().filter(user=owner, revoked_at=None):
        token.refresh_from_db(fields=["revoked_at"])
        if token.revoked_at is None:
            count += _revoke_with_children(token, user=user, reason=reason, now=now)
    return count


@transaction.atomic
def service_account_deactivate(*, account: ServiceAccount, user: User, reason: str) -> None:
    """The account stops: its user is deactivated and every token of it revoked."""
    account = ServiceAccount.objects.select_for_update().select_related("user").get(pk=account.pk)
    if not user_may_manage_service_accounts(user=user, project=account.project):
        raise PermissionDenied(
            _("Only ops, or the project's lead, may manage its service accounts.")
        )
    if account.deactivated_at is not None:
        raise ValidationError(_("This service account is already deactivated."))
    now = timezone.now()
    account.deactivated_at = now
    governed_save(account, user=user, reason=reason)
    account.user.is_active = False
    governed_save(account.user, user=user, reason=reason)
    for token in ApiToken.objects.select_for_update().filter(user=account.user, revoked_at=None):
        token.refresh_from_db(fields=["revoked_at"])
        if token.revoked_at is None:
            _revoke_with_children(token, user=user, reason=reason, now=now)


@transaction.atomic
def service_account_token_create(
    *,
    account: ServiceAccount,
    name: str,
    scopes: Iterable[str],
    expires_in_days: int | None = None,
    user: User,
    reason: str = "",
    parent: ApiToken | None = None,
) -> ApiToken:
    """A token for ``account``, made by its project's lead or ops (shown once). With the
    ``request`` scope it waits for a second person's approval (``api_token_approve``)."""
    if not user_may_manage_service_accounts(user=user, project=account.project):
        raise PermissionDenied(
            _("Only ops, or the project's lead, may manage its service accounts.")
        )
    account = ServiceAccount.objects.select_related("user").get(pk=account.pk)
    if account.deactivated_at is not None:
        raise ValidationError(_("This service account is deactivated."))
    return _token_make(
        owner=account.user,
        name=name,
        scopes=scopes,
        days=expires_in_days,
        user=user,
        reason=reason or _("Token made for the service account"),
        parent=parent,
    )


@transaction.atomic
def api_token_revoke(*, token: ApiToken, user: User, reason: str = "") -> ApiToken:
    """The token stops working at once. Its owner revokes a personal token; a service
    account's token is revoked by those who manage the account."""
    token = ApiToken.objects.select_for_update().select_related("user").get(pk=token.pk)
    owner = token.user
    if owner.is_service_account:
        account = ServiceAccount.objects.get(user=owner)
        allowed = user_may_manage_service_accounts(user=user, project=account.project)
    else:
        allowed = owner.pk == user.pk and user_may_manage_personal_tokens(user)
    if not allowed:
        raise PermissionDenied(_("You may not revoke this token."))
    if token.revoked_at is not None:
        raise ValidationError(_("This token is already revoked."))
    # What it minted ends with it.
    _revoke_with_children(token, user=user, reason=reason or _("Token revoked"), now=timezone.now())
    token.refresh_from_db()
    return token


def api_token_touch(*, token: ApiToken, address: str | None) -> None:
    """Record the token's use: at most one write a minute per token (a pipeline's burst of
    calls costs one write)."""
    now = timezone.now()
    usage: ApiTokenUsage | None = getattr(token, "_usage_cache", None)
    if usage is None:
        try:
            usage = token.usage  # type: ignore[attr-defined]
        except ApiTokenUsage.DoesNotExist:
            usage = None
    if usage is not None and now - usage.last_used_at < USAGE_INTERVAL:
        return
    # Not governed (no history): one statement, racing requests agree on "about now".
    if usage is None:
        ApiTokenUsage.objects.bulk_create(
            [ApiTokenUsage(token_id=token.pk, last_used_at=now, last_used_address=address)],
            ignore_conflicts=True,
        )
    else:
        ApiTokenUsage.objects.filter(token_id=token.pk).update(
            last_used_at=now, last_used_address=address
        )


def api_write_record(
    *,
    token: ApiToken,
    method: str,
    path: str,
    status_code: int,
    pipeline_run_url: str = "",
    address: str | None = None,
) -> ApiWrite:
    """One write through the API with a token (append-only audit)."""
    write = ApiWrite(
        token=token,
        user_id=token.user_id,
        method=method[:10],
        path=path[:500],
        status_code=status_code,
        pipeline_run_url=_clean_run_url(pipeline_run_url),
        address=address,
    )
    write.full_clean()
    write.save()
    return write


def _clean_run_url(value: Any) -> str:
    value = str(value or "").strip()
    if not value.lower().startswith(("http://", "https://")):
        return ""
    return "".join(char for char in value if char.isprintable())[:500]
