"""Reads of rule changes: the timeline, a change's plan (diff, scope, warnings), the
rollback plan, the per-object timeline, and the reviews that are due."""

from .diff import (
    EMPTY,
    EditRow,
    display_value,
    edit_rows,
)
from .kinds import (
    EXISTS,
    REGISTRY,
    HistorySection,
    KeyedField,
    RuleKind,
    object_types,
    rule_kind_for,
    rule_kind_named,
    rule_kind_register,
)
from .plan import (
    ChangePlan,
    RollbackRow,
    Scope,
    change_scope,
    rollback_plan,
    rule_change_plan,
    rule_change_warning_messages,
    rule_change_warnings,
)
from .reviews import (
    quota_review_recipients,
    quotas_due_for_review,
)
from .timeline import (
    CHANGE_SORTS,
    rule_change_filter,
    rule_change_get,
    rule_change_list,
    rule_changes_for_object,
)
from .values import (
    RollbackItem,
    current_value,
    model_field,
    object_key,
    object_lookup,
    object_type_of,
    rollback_items,
    snapshot,
    stale_edits,
    value_to_json,
)

__all__ = [
    "CHANGE_SORTS",
    "EMPTY",
    "EXISTS",
    "REGISTRY",
    "ChangePlan",
    "EditRow",
    "HistorySection",
    "KeyedField",
    "RollbackItem",
    "RollbackRow",
    "RuleKind",
    "Scope",
    "change_scope",
    "current_value",
    "display_value",
    "edit_rows",
    "model_field",
    "object_key",
    "object_lookup",
    "object_type_of",
    "object_types",
    "quota_review_recipients",
    "quotas_due_for_review",
    "rollback_items",
    "rollback_plan",
    "rule_change_filter",
    "rule_change_get",
    "rule_change_list",
    "rule_change_plan",
    "rule_change_warning_messages",
    "rule_change_warnings",
    "rule_changes_for_object",
    "rule_kind_for",
    "rule_kind_named",
    "rule_kind_register",
    "snapshot",
    "stale_edits",
    "value_to_json",
]
