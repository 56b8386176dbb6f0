"""Locking a rule change and checking, on the locked row, that the user may act on it."""

from governance.models import ChangeAction, RuleChange, User
from governance.selectors.blockers import change_action_blocker


def lock_change(change: RuleChange) -> RuleChange:
    return RuleChange.objects.select_for_update().get(pk=change.pk)


def require_action(change: RuleChange, *, user: User, action: ChangeAction) -> None:
    """Refuse unless ``user`` may do ``action`` now (the rule the pages show buttons by)."""
    blocker = change_action_blocker(change=change, user=user, action=action)
    if blocker is not None:
        raise blocker.error()
