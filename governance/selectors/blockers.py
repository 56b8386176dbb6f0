"""Who may do what to a rule change, and when: the one rule that pages show buttons by and
services check (on the locked row) before they write.

A ``Blocker`` says why not: ``forbidden`` when the person never may (a 403), otherwise not
now (a 400: the change's status). ``approvals`` uses the same ``Blocker`` for requests.
"""

from dataclasses import dataclass
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils.translation import gettext as _

from governance.models import (
    OPEN_STATUSES,
    ChangeAction,
    ChangeStatus,
    RuleChange,
    User,
)

from .changes.kinds import EXISTS, rule_kind_for
from .rules import user_can_edit_rules, user_can_read_rules
from .tokens import stands_behind


@dataclass(frozen=True)
class Blocker:
    message: str
    forbidden: bool = False
    # A short machine-readable reason (e.g. "applied"), kept on the ValidationError.
    code: str | None = None

    def __str__(self) -> str:
        return self.message

    def error(self) -> Exception:
        """What a service raises: ``PermissionDenied`` (403) or ``ValidationError`` (400)."""
        if self.forbidden:
            return PermissionDenied(self.message)
        return ValidationError(self.message, code=self.code)


# What a service account may never do to a rule change, whatever its site role.
SERVICE_ACCOUNTS_NEVER = (
    ChangeAction.APPROVE,
    ChangeAction.REJECT,
    ChangeAction.APPLY,
    ChangeAction.ROLL_BACK,
)


def _owners(change: RuleChange) -> list[tuple[Any, Any, int | None] | None]:
    """Per edit of ``change``: ``None`` when its object's kind names no owner (ops decide),
    else the object (or, for a creation not yet applied, the name it will have), its kind and
    the id of its owner: the one it has, or the one a creation gives it (its future owner)."""
    result: list[tuple[Any, Any, int | None] | None] = []
    for edit in change.edits.select_related("content_type"):
        model = edit.content_type.model_class()
        assert model is not None
        kind = rule_kind_for(model)
        obj = model._default_manager.filter(pk=edit.object_id).first()
        if kind is None or kind.owner_field is None:
            result.append(None)
        elif obj is not None:
            result.append((obj, kind, getattr(obj, f"{kind.owner_field}_id")))
        elif edit.field == EXISTS and isinstance(edit.new_value, dict):
            snapshot = edit.new_value
            name = snapshot.get("name") or snapshot.get(kind.key_field) or "?"
            result.append((name, kind, snapshot.get(kind.owner_field)))
        else:
            result.append(None)
    return result


def _edits_own_access(change: RuleChange, user: Any) -> bool:
    """Whether ``change`` edits ``user``'s own account or an entry keyed by them (their
    membership of a project: a keyed field whose key is a user)."""
    for edit in change.edits.all():
        model = ContentType.objects.get_for_id(edit.content_type_id).model_class()
        if model is User and edit.object_id == user.pk:
            return True
        kind = rule_kind_for(model) if model is not None else None
        keyed = kind.keyed.get(edit.field) if kind is not None else None
        if keyed is not None and keyed.key_model is User and edit.key == user.pk:
            return True
    return False


def through_account_problem(*, user: Any, authors: list[Any], action: str) -> str | None:
    """Four eyes across identities: why ``user`` may not ``action`` what one of ``authors``
    made, when that author is a service account ``user`` stands behind (made it, minted one of
    its tokens, or leads its project), or None."""
    account = stands_behind(user=user, authors=authors)
    if account is None:
        return None
    return _(
        "Four eyes: this was authored through the service account “%(account)s”, which you "
        "made, manage or minted a token for, so it counts as yours: someone else must "
        "%(action)s it."
    ) % {"account": account.username, "action": action}


def _change_authors(change: RuleChange) -> list[Any]:
    return [change.author, change.proposed_by]


def approval_problem(*, change: RuleChange, user: Any) -> str | None:
    """Why ``user`` may not approve (or reject) ``change``, whatever its status."""
    if getattr(user, "is_service_account", False):
        return _("A service account may not approve or reject anything.")
    if not user_can_read_rules(user):
        return _("Your account is inactive.")
    if user.pk in (change.author_id, change.proposed_by_id):
        return _("You proposed this change: someone else must approve it.")
    problem = through_account_problem(
        user=user, authors=_change_authors(change), action=_("approve")
    )
    if problem is not None:
        return problem
    if _edits_own_access(change, user):
        return _("This change edits your own account or membership: someone else must decide.")
    proposers = {change.author_id, change.proposed_by_id}
    needs_ops = False
    for owned in _owners(change):
        # An object whose kind names an owner (a tier's business owner) is approved by
        # that owner, or by ops when the owner proposed it; anything else by ops. A new
        # tier the same way, by its future owner: ops proposed it, so both sides decide.
        if owned is None:
            needs_ops = True
            continue
        obj, kind, owner_id = owned
        if owner_id is None:
            needs_ops = True
            continue
        if owner_id == user.pk or (user.is_ops and owner_id in proposers):
            continue
        owner = User.objects.filter(pk=owner_id).first()
        return _(kind.owner_message) % {"object": obj, "owner": owner}
    if needs_ops and not user.is_ops:
        return _("A change to quotas, pools, projects, flavors or preemption classes needs ops.")
    return None


def _status_blocker(change: RuleChange, *allowed: str) -> Blocker | None:
    if change.status in allowed:
        return None
    if change.status in (ChangeStatus.APPLIED, ChangeStatus.ROLLED_BACK):
        return Blocker(_("Change #%(id)d was already applied.") % {"id": change.pk}, code="applied")
    return Blocker(
        _("Change #%(id)d is %(status)s.")
        % {"id": change.pk, "status": change.get_status_display().lower()},
        code="status",
    )


def change_action_blocker(
    *, change: RuleChange, user: Any, action: ChangeAction | str
) -> Blocker | None:
    """Why ``user`` may not do ``action`` to ``change`` now, or ``None`` when they may."""
    action = ChangeAction(action)
    if getattr(user, "is_service_account", False) and action in SERVICE_ACCOUNTS_NEVER:
        # A pipeline's or an ops tool's token never decides or applies anything.
        return Blocker(
            _("A service account may not approve, reject, apply or roll back a rule change."),
            forbidden=True,
        )
    is_author = user_can_read_rules(user) and user.pk in (change.author_id, change.proposed_by_id)
    is_ops = user_can_edit_rules(user)
    if action == ChangeAction.PROPOSE:
        if change.status != ChangeStatus.DRAFT:
            return Blocker(
                _("Only a draft can be proposed; this change is %(status)s.")
                % {"status": change.get_status_display().lower()}
            )
        if not (is_ops or (user_can_read_rules(user) and user.pk == change.author_id)):
            return Blocker(_("Only the author or ops may propose this change."), forbidden=True)
        return None
    if action in (ChangeAction.APPROVE, ChangeAction.REJECT):
        allowed = (
            (ChangeStatus.PROPOSED,)
            if action == ChangeAction.APPROVE
            else (ChangeStatus.PROPOSED, ChangeStatus.APPROVED)
        )
        blocker = _status_blocker(change, *allowed)
        if blocker is not None:
            return blocker
        problem = approval_problem(change=change, user=user)
        return None if problem is None else Blocker(problem, forbidden=True)
    if action == ChangeAction.WITHDRAW:
        blocker = _status_blocker(change, *OPEN_STATUSES)
        if blocker is not None:
            return blocker
        if not is_author:  # the others decide it: approve or reject
            return Blocker(
                _("Only its author may withdraw this change; others approve or reject it."),
                forbidden=True,
            )
        return None
    if action == ChangeAction.APPLY:
        if not is_ops:
            return Blocker(_("Only ops may apply a rule change."), forbidden=True)
        blocker = _status_blocker(change, ChangeStatus.APPROVED)
        if blocker is not None:
            return blocker
        problem = through_account_problem(
            user=user, authors=_change_authors(change), action=_("apply")
        )
        return None if problem is None else Blocker(problem, forbidden=True)
    # Roll back: ops propose the change that restores the old values.
    if change.status != ChangeStatus.APPLIED:
        return Blocker(
            _("Only an applied change can be rolled back; change #%(id)d is %(status)s.")
            % {"id": change.pk, "status": change.get_status_display().lower()}
        )
    if not is_ops:
        return Blocker(_("Only ops may roll back a rule change."), forbidden=True)
    problem = through_account_problem(
        user=user, authors=_change_authors(change), action=_("roll back")
    )
    return None if problem is None else Blocker(problem, forbidden=True)


def change_action_blockers(*, change: RuleChange, user: Any) -> dict[str, Blocker | None]:
    """``change_action_blocker`` for every action (for a change's page)."""
    return {
        action.value: change_action_blocker(change=change, user=user, action=action)
        for action in ChangeAction
    }
