"""The one rule every governance write obeys: only ops edits rules."""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext as _

from governance.models import User

# Set only while a proposal's dry run applies it inside a savepoint that is always rolled
# back: the services' checks then run for a tier owner's proposal as for an ops proposal.
_dry_run: ContextVar[bool] = ContextVar("governance_dry_run", default=False)
# Set only while the identity provider's groups claim proposes a site role or a tier's
# ownership for the person signing in (``services.identity``): the person is the change's
# author, and someone else approves it as every change.
_directory_proposal: ContextVar[bool] = ContextVar("governance_directory_proposal", default=False)


@contextmanager
def dry_run() -> Iterator[None]:
    token = _dry_run.set(True)
    try:
        yield
    finally:
        _dry_run.reset(token)


@contextmanager
def directory_proposal() -> Iterator[None]:
    token = _directory_proposal.set(True)
    try:
        yield
    finally:
        _directory_proposal.reset(token)


def is_directory_proposal() -> bool:
    return _directory_proposal.get()


def require_ops(user: User) -> None:
    if _dry_run.get():
        return
    if not user.is_ops:
        raise PermissionDenied(_("Only ops may change the rules."))
