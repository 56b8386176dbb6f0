"""Rule changes: propose, approve, apply and roll back audited sets of rule edits.

Every edit of a rule goes through a change. A change records, per object and field, the
value before and the value it sets; it is proposed (with its plan checked by a dry run),
approved by someone other than its proposer, and applied in one transaction through the
service of each rule kind, so that a failing invariant in any edit leaves every edit
unapplied. History rows written while applying point to the change. A rollback is a new
change; nothing is edited or deleted afterwards.
"""

from .apply import rule_change_apply
from .builtin import (
    BUILTIN_CREATE,
    builtin_object_delete,
    create_fields,
    create_required_fields,
)
from .decide import (
    rule_change_approve,
    rule_change_reject,
    rule_change_withdraw,
)
from .propose import rule_change_create, rule_change_propose
from .registry import REGISTRY, RuleKind, rule_kind_for, rule_kind_register
from .rollback import rule_change_rollback
from .spec import (
    CAPACITY,
    EDITABLE,
    EXISTS,
    KEYED,
    MEMBERSHIP,
    TITLE_MAX_LENGTH,
    EditSpec,
    value_from_json,
)

__all__ = [
    "BUILTIN_CREATE",
    "CAPACITY",
    "EDITABLE",
    "EXISTS",
    "KEYED",
    "MEMBERSHIP",
    "REGISTRY",
    "TITLE_MAX_LENGTH",
    "EditSpec",
    "RuleKind",
    "builtin_object_delete",
    "create_fields",
    "create_required_fields",
    "rule_change_apply",
    "rule_change_approve",
    "rule_change_create",
    "rule_change_propose",
    "rule_change_reject",
    "rule_change_rollback",
    "rule_change_withdraw",
    "rule_kind_for",
    "rule_kind_register",
    "value_from_json",
]
