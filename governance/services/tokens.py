"""Personal API tokens: each person makes, replaces or revokes their own, never another's.

The token is DRF's ``Token`` (one per user; ``Authorization: Token <key>``). The services
take only the signed-in user, so there is no way to make a token for someone else; the
``drf_create_token`` management command remains the way for an administrator.
"""

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils.translation import gettext as _
from rest_framework.authtoken.models import Token

from governance.models import User


@transaction.atomic
def user_token_rotate(*, user: User) -> Token:
    """Make ``user``'s token, replacing the one they had (which stops working at once)."""
    if not user.is_active:
        raise PermissionDenied(_("Your account is inactive."))
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user)


@transaction.atomic
def user_token_revoke(*, user: User) -> bool:
    """Delete ``user``'s token; return whether there was one."""
    deleted, _rows = Token.objects.filter(user=user).delete()
    return deleted > 0
