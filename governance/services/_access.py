"""The one rule every governance write obeys: only ops edits rules."""

from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext as _

from governance.models import User


def require_ops(user: User) -> None:
    if not user.is_ops:
        raise PermissionDenied(_("Only ops may change the rules."))
