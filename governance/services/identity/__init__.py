"""Signing in through the organisation's identity provider (OpenID Connect).

``identity_sign_in`` takes the claims of a verified ID token (and the userinfo answer) and
returns the person: matched by issuer and subject, created on the first sign-in as an active
member with no password and no power, their name, e-mail and language kept up to date.

The directory's groups then decide:

- the memberships of the projects that ``ARBITER_OIDC_PROJECT_GROUPS`` names, added,
  changed and removed through the membership service and signed in the history by Arbiter's
  own account, with the issuer, the claim and the group in the reason;
- nothing about site roles and tier ownership beyond a proposal: a group of
  ``ARBITER_OIDC_ROLE_GROUPS`` proposes a rule change (authored by the person, approved by
  someone else as every change is). Leaving a site role's group takes the role away at once.

``identity_recheck`` asks the provider (a refresh-token grant) whether the account still
exists; when it does not, ``identity_disable`` marks the identity disabled, revokes the
person's API tokens and ends their sessions (whatever their password), writes the person's
history and mails them and ops. ``identities_recheck_due`` (beat, every minute) asks about
everyone who still holds something, so that this happens within the recheck interval.

The package re-exports every public name it held as one module.
"""

from .claims import (
    USERNAME_MAX_LENGTH,
    IdentityRefused,
    claimed_groups,
    language_from_locale,
    refresh_token_open,
    refresh_token_seal,
)
from .recheck import (
    ProviderSaysNo,
    ProviderSilent,
    identities_recheck_due,
    identity_disable,
    identity_disabled_notify,
    identity_recheck,
)
from .sign_in import identity_sign_in

__all__ = [
    "USERNAME_MAX_LENGTH",
    "IdentityRefused",
    "ProviderSaysNo",
    "ProviderSilent",
    "claimed_groups",
    "identities_recheck_due",
    "identity_disable",
    "identity_disabled_notify",
    "identity_recheck",
    "identity_sign_in",
    "language_from_locale",
    "refresh_token_open",
    "refresh_token_seal",
]
