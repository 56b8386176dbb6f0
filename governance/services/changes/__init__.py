"""Rule changes: propose, approve, apply and roll back audited sets of rule edits.

Every edit of a rule goes through a change. A change records, per object and field, the
value before and the value it sets; it is proposed (with its plan checked by a dry run),
approved by someone other than its proposer, and applied in one transaction through the
services of each rule kind, so that a failing invariant in any edit leaves every edit
unapplied. History rows written while applying point to the change. A rollback is a new
change; nothing is edited or deleted afterwards.

What a change may edit is what the registered rule kinds declare
(``selectors.changes.kinds``); the built-in ones are declared in ``kinds``.
"""

from governance.selectors.changes import (
    EXISTS,
    KeyedField,
    RuleKind,
    rule_kind_for,
    rule_kind_register,
)

from .apply import rule_change_apply
from .decide import (
    rule_change_approve,
    rule_change_reject,
    rule_change_withdraw,
)
from .kinds import BUILTIN_KINDS, CAPACITY, MEMBERSHIP, rule_object_delete
from .propose import (
    rule_change_create,
    rule_change_propose,
    rule_object_propose_create,
    rule_object_propose_delete,
    rule_object_propose_update,
)
from .rollback import rule_change_rollback
from .spec import TITLE_MAX_LENGTH, EditSpec, value_from_json

__all__ = [
    "BUILTIN_KINDS",
    "CAPACITY",
    "EXISTS",
    "MEMBERSHIP",
    "TITLE_MAX_LENGTH",
    "EditSpec",
    "KeyedField",
    "RuleKind",
    "rule_change_apply",
    "rule_change_approve",
    "rule_change_create",
    "rule_change_propose",
    "rule_change_reject",
    "rule_change_rollback",
    "rule_change_withdraw",
    "rule_kind_for",
    "rule_kind_register",
    "rule_object_delete",
    "rule_object_propose_create",
    "rule_object_propose_delete",
    "rule_object_propose_update",
    "value_from_json",
]
