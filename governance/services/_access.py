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


@contextmanager
def dry_run() -> Iterator[None]:
    token = _dry_run.set(True)
    try:
        yield
    finally:
        _dry_run.reset(token)


def require_ops(user: User) -> None:
    if _dry_run.get():
        return
    if not user.is_ops:
        raise PermissionDenied(_("Only ops may change the rules."))
