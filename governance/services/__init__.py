"""Writes to the governed rules. Every function here is the one way to make its change."""

from .changes import (
    EXISTS,
    EditSpec,
    RuleKind,
    approval_problem,
    rule_change_apply,
    rule_change_approve,
    rule_change_create,
    rule_change_propose,
    rule_change_reject,
    rule_change_rollback,
    rule_change_withdraw,
    rule_kind_register,
)
from .demo import demo_seed
from .flavors import flavor_create, flavor_update
from .grants import grant_create, grant_revoke, grants_transition, system_user
from .pools import pool_capacity_set, pool_create, pool_overcommit_message, pool_update
from .preemption import preemption_class_create, preemption_class_update
from .projects import membership_remove, membership_set, project_create, project_update
from .quotas import quota_create, quota_update
from .reviews import review_record, review_reminders_send
from .revisions import rules_revision_create
from .tiers import tier_create, tier_update

__all__ = [
    "EXISTS",
    "EditSpec",
    "RuleKind",
    "approval_problem",
    "demo_seed",
    "flavor_create",
    "flavor_update",
    "grant_create",
    "grant_revoke",
    "grants_transition",
    "membership_remove",
    "membership_set",
    "pool_capacity_set",
    "pool_create",
    "pool_overcommit_message",
    "pool_update",
    "preemption_class_create",
    "preemption_class_update",
    "project_create",
    "project_update",
    "quota_create",
    "quota_update",
    "review_record",
    "review_reminders_send",
    "rule_change_apply",
    "rule_change_approve",
    "rule_change_create",
    "rule_change_propose",
    "rule_change_reject",
    "rule_change_rollback",
    "rule_change_withdraw",
    "rule_kind_register",
    "rules_revision_create",
    "system_user",
    "tier_create",
    "tier_update",
]
