"""People as the portal shows them: who holds which site role, who is active."""

from typing import Any

from django.db.models import QuerySet

from governance.models import User

from .rules import _scoped_get


def person_list() -> QuerySet[User]:
    return User.objects.order_by("username")


def person_get(*, user: Any, username: str, for_edit: bool = False) -> User:
    """A person by username: readable by everyone signed in; ops may propose access changes
    (404 for anyone not signed in, 403 to edit without the ops role)."""
    return _scoped_get(person_list(), user=user, for_edit=for_edit, username=username)
